# Read by ctest after the discovered gtest tests (TEST_INCLUDE_FILES, tests/CMakeLists.txt, where the property tests
# are defined): the longest test gets a COST, so that ctest starts it first even without its own record of past times
# (a clean build has none) and the short ones fill the other core around it. Seconds measured on the 2-core
# development machine (session 56). (The unit tests run as shards of about 9 s each.)
set_tests_properties(SchedProperties.NoRaceInTheSchedulersOwnEventFlow PROPERTIES COST 36)
