# A layer's include view is its only way to other layers' headers, so no source of src/ or
# include/ may climb out of its folder with a relative include ("../observe/trace.h").
file(GLOB_RECURSE sources ${SOURCE_DIR}/src/*.h ${SOURCE_DIR}/src/*.cpp ${SOURCE_DIR}/src/*.cuh
     ${SOURCE_DIR}/src/*.cu ${SOURCE_DIR}/include/*.h)
set(found)
foreach(source ${sources})
  file(STRINGS ${source} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<][.][.]/")
  foreach(line ${lines})
    file(RELATIVE_PATH name ${SOURCE_DIR} ${source})
    list(APPEND found "${name}: ${line}")
  endforeach()
endforeach()
if(found)
  list(JOIN found "\n" found)
  message(FATAL_ERROR "relative includes that bypass the layers' include views:\n${found}")
endif()
list(LENGTH sources count)
message(STATUS "${count} sources, none with a relative include")
