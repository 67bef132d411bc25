# Engine runtime sources (ds_engine) and tests.
