"""Airflow triggers (import Airflow)."""
