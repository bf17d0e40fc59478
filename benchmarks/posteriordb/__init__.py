"""posteriordb posteriors in TFP form (`models`) and their NUTS check (``check_nuts.py``)."""
