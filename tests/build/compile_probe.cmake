# Compiles one probe (tests/build/CMakeLists.txt) with a layer's include directories and checks
# the outcome: EXPECTED is "compiles"; "error", for a probe that must fail with the text of its
# line "// expected error: TEXT"; or the header whose absence must stop the compilation.
string(REPLACE "|" ";" includes "${INCLUDES}")
if(NOT includes)
  message(FATAL_ERROR "no include directories given: is the layer's target name right?")
endif()
set(flags)
foreach(dir ${includes})
  list(APPEND flags "-I${dir}")
endforeach()
execute_process(
  COMMAND ${COMPILER} -std=c++20 -fsyntax-only ${flags} ${PROBE}
  RESULT_VARIABLE status
  OUTPUT_VARIABLE output
  ERROR_VARIABLE output)
if(EXPECTED STREQUAL "compiles")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${PROBE} should compile with the include view, and did not:\n${output}")
  endif()
  message(STATUS "compiles, as it should")
  return()
endif()
if(EXPECTED STREQUAL "error")
  file(STRINGS ${PROBE} expected_lines REGEX "^// expected error: ")
  list(GET expected_lines 0 expected_line)
  string(REPLACE "// expected error: " "" expected_text "${expected_line}")
  if(status EQUAL 0)
    message(FATAL_ERROR "${PROBE} compiled; it must fail with: ${expected_text}")
  endif()
  string(FIND "${output}" "${expected_text}" found)
  if(found EQUAL -1)
    message(FATAL_ERROR "${PROBE} failed to compile, but not with \"${expected_text}\":\n${output}")
  endif()
  message(STATUS "refused, as it should be: ${expected_text}")
  return()
endif()
if(status EQUAL 0)
  message(FATAL_ERROR "${PROBE} compiled, so the layer can include ${EXPECTED}: the layer rule "
                      "does not hold")
endif()
string(REPLACE "." "\\." header_regex "${EXPECTED}")
if(NOT output MATCHES "${header_regex}: No such file or directory|'${header_regex}' file not found")
  message(FATAL_ERROR "${PROBE} failed to compile, but not because ${EXPECTED} is out of sight:\n"
                      "${output}")
endif()
message(STATUS "refused, as it should be: ${EXPECTED} is not in the layer's view")
