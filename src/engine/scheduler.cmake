# Scheduler sources (ds_engine_scheduler) and tests.
