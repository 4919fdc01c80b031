# Runs one libFuzzer target for a bounded time from freshly written seeds.
#   cmake -DFUZZER=... -DSEEDS=... -DREADER=idx -DWORK=dir -DSECONDS=20 -P run_fuzzer.cmake
foreach(required FUZZER SEEDS READER WORK SECONDS)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "run_fuzzer.cmake: pass -D${required}=...")
  endif()
endforeach()
if(NOT EXISTS "${FUZZER}")
  message(FATAL_ERROR "${FUZZER} is missing; build the tandem_fuzzers target first")
endif()

file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/corpus" "${WORK}/seeds" "${WORK}/crashes")
execute_process(COMMAND "${SEEDS}" ${READER} "${WORK}/seeds" RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "fuzz_seeds ${READER} failed with status ${status}")
endif()
# New inputs go to corpus/; the seeds are read only. A crash, leak, sanitizer report, timeout
# or memory blow-up ends the run with a non-zero status and its input in crashes/.
execute_process(
  COMMAND "${FUZZER}" -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048
          -print_final_stats=1 -artifact_prefix=${WORK}/crashes/ "${WORK}/corpus" "${WORK}/seeds"
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  file(GLOB crashes "${WORK}/crashes/*")
  message(FATAL_ERROR "fuzz target ${READER} failed (status ${status}): ${crashes}; reproduce "
                      "with ${FUZZER} <that file>")
endif()
