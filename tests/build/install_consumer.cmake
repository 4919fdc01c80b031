# Installs the build into WORK/prefix and builds and runs the consumer project against it
# (tests/build/CMakeLists.txt).
file(REMOVE_RECURSE ${WORK})
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE output
                  ERROR_VARIABLE output)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${what} failed (${status}):\n${output}")
  endif()
  message(STATUS "${what}: done")
  set(last_output "${output}" PARENT_SCOPE)
endfunction()
run("install" ${CMAKE_COMMAND} --install ${TANDEM_BUILD} --prefix ${WORK}/prefix)
run("configure the consumer" ${CMAKE_COMMAND} -S ${CONSUMER} -B ${WORK}/build
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    -DCMAKE_PREFIX_PATH=${WORK}/prefix)
run("build the consumer" ${CMAKE_COMMAND} --build ${WORK}/build)
run("run the consumer" ${WORK}/build/consumer)
if(NOT last_output MATCHES "consumer: ok")
  message(FATAL_ERROR "the consumer did not finish:\n${last_output}")
endif()
message(STATUS "${last_output}")
