# Runs `tandem train` and checks the test accuracy in its JSON report.
#   cmake -DTANDEM_CLI=... -DMODEL=cnn -DEPOCHS=4 -DMIN_ACCURACY=0.90 -DDATA_DIR=... -DREPORT=...
#         -P check_training.cmake
foreach(required TANDEM_CLI MODEL EPOCHS MIN_ACCURACY DATA_DIR REPORT)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "check_training.cmake: pass -D${required}=...")
  endif()
endforeach()

if(NOT IS_DIRECTORY "${DATA_DIR}")
  message("SKIPPED: ${DATA_DIR} is absent; install the Debian package dataset-fashion-mnist")
  return()
endif()

file(REMOVE "${REPORT}")
execute_process(
  COMMAND "${TANDEM_CLI}" train --model ${MODEL} --epochs ${EPOCHS} --data-dir "${DATA_DIR}"
          --report "${REPORT}"
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "tandem train exited with status ${status}")
endif()
if(NOT EXISTS "${REPORT}")
  message(FATAL_ERROR "tandem train succeeded but wrote no report at ${REPORT}")
endif()

file(READ "${REPORT}" report)
string(JSON accuracy ERROR_VARIABLE json_error GET "${report}" test_accuracy)
if(json_error)
  message(FATAL_ERROR "${REPORT}: no test_accuracy (${json_error}):\n${report}")
endif()
string(JSON samples_per_sec GET "${report}" samples_per_sec)
string(JSON train_seconds GET "${report}" train_seconds)
message("${MODEL}, ${EPOCHS} epochs: test accuracy ${accuracy} (needs >= ${MIN_ACCURACY}), "
        "${samples_per_sec} samples/s, ${train_seconds} s training")
if(accuracy LESS MIN_ACCURACY)
  message(FATAL_ERROR "test accuracy ${accuracy} is below ${MIN_ACCURACY} after ${EPOCHS} epochs")
endif()
