# Scheduler sources (ds_engine_scheduler) and tests: pure bookkeeping over kvcache, no model.
add_library(ds_engine_scheduler
  scheduler.cpp
  tenant_share.cpp
  waiting_queue.cpp
)
target_include_directories(ds_engine_scheduler PUBLIC ${PROJECT_SOURCE_DIR}/src)
# request.h (included by scheduler.h) names SamplingParams from sampling/sampler.h.
target_link_libraries(ds_engine_scheduler PUBLIC ds_kvcache ds_sampling ds_base fmt::fmt)
ds_set_warnings(ds_engine_scheduler)

ds_add_test(engine_scheduler_test
  SOURCES scheduler_test.cpp scheduler_stress_test.cpp scheduler_restore_test.cpp scheduler_speculative_test.cpp
          waiting_queue_test.cpp
  LIBS ds_engine_scheduler)
