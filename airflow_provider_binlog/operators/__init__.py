"""Airflow operators (import Airflow)."""
