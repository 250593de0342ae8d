# Read by ctest after the discovered gtest tests (TEST_INCLUDE_FILES, tests/CMakeLists.txt, where the unit and the
# property tests are both defined): the longest tests get a COST, so that ctest starts them first even without its
# own record of past times (a clean build has none) and the short ones fill the other core around them. Seconds
# measured on the 2-core development machine (session 56).
set_tests_properties(SchedProperties.NoRaceInTheSchedulersOwnEventFlow PROPERTIES COST 36)
set_tests_properties(ConfigSpaceSweep.TinyModelsOnDrawnTopologiesAndLifecyclesHaveNoRaceAndMatchTheCpu
                     PROPERTIES COST 10)
set_tests_properties(Calibrate.MeasuresAValidCpuAndChecksEveryFixtureGraph PROPERTIES COST 9)
set_tests_properties(Fixtures.EveryCatalogueNameBuilds PROPERTIES COST 8)
