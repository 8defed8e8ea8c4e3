"""Celery workers: thin tasks that each call one er.pipeline function."""
