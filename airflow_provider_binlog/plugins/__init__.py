"""Airflow UI plugin of the provider: the "Binlog CDC" status view.

:mod:`.status` gathers what the view shows (no web framework), :mod:`.charts` draws the SVG
charts, :mod:`.page` renders the HTML, and :mod:`.cdc_view` is the Airflow plugin (registered
through the ``airflow.plugins`` entry point).
"""
