"""Airflow hooks (import Airflow)."""
