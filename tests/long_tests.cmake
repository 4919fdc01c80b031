# Read by ctest after the discovered tests (tests/CMakeLists.txt): the tests that run for minutes on
# the 2-core CI machine, in the plain build or under the sanitizers, with their times there (plain;
# sanitized). A name that no longer exists is ignored by ctest: keep this list in step with the
# tests.
#
# ctest starts them first (a COST: a fresh clone has no timings of its own yet), so that none
# starts late and runs on alone at the end of the run; io.crash_resume has its COST where it is
# added.
#
# Those that train models to a peer's accuracy, with most of their time in the peer's Python or
# in the XLA plugin, are labelled "accuracy" too: `make test-sanitize` leaves them out (the
# training code they run is sanitized by the shorter tests of train, cli and xla).

macro(tandem_long_test name labels cost)
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" COST ${cost})
endmacro()

tandem_long_test(KerasModelCli.KerasModelsTrainToKerasAccuracy "cli;accuracy" 1000)  # 7; 12.5 min
tandem_long_test(TrainCommand.XlaCpuTrainsTheCnnToTutorialAccuracy "cli;accuracy" 1000)  # 66; 140 s
tandem_long_test(SweepCli.AKilledSweepStartedAgainFinishesWithTheSameTable cli 500)  # 8; 150 s
tandem_long_test(SweepCli.SuccessiveHalvingFindsTheGridsBestForHalfItsCompute cli 500)  # 4; 70 s
tandem_long_test(CliDeterministic.WeightsAreBitIdenticalForAnyThreadCount io 500)  # 8; 63 s
