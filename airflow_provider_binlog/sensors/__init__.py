"""Airflow sensors (import Airflow)."""
