# The layers of docs/ARCHITECTURE.md as build targets, each compiled against an include view of
# its own.
#
# A layer's view (<build>/layers/<layer>/) holds symbolic links to its folder of src/ and to
# those of every layer below it (transitively), and, under tandem/, to the public headers of
# include/tandem/ that those layers own. It is the layer's only include root for Tandem's own
# headers ("ops/op_table.h", <tandem/ops.h>): src/ and include/ themselves are not on its path,
# so a header of a layer above (or beside) it is simply not there and the include fails with
# "No such file or directory". tests/build compiles probes against these views to check that.
#
#   tandem_layer(<layer> FOLDER <folder of src/> [DEPENDS <layers>...] [HEADERS <headers>...]
#                [ALSO_SEES <public headers of layers above>...])
#     declares a layer; layers must be declared after the ones they depend on.
#   tandem_check_layers()
#     checks that every header of include/tandem/ and every folder of src/ belongs to a layer.
#   tandem_add_layer_library(<layer> [TYPE OBJECT|STATIC] [TARGET <name>] [EXCLUDE_REGEX <re>])
#     the layer's library (tandem_<layer>, an object library unless TYPE says otherwise) from the
#     .cpp files of its folder, compiled against its view. Object libraries are listed in
#     TANDEM_LIBRARY_LAYERS, the parts of libtandem.a.

set(TANDEM_LAYER_ROOT ${CMAKE_BINARY_DIR}/layers)
set(TANDEM_LIBRARY_LAYERS)
set(TANDEM_OWNED_PUBLIC_HEADERS)
set(TANDEM_LAYER_FOLDERS)

macro(tandem_layer layer)
  cmake_parse_arguments(tandem_layer_arg "" "FOLDER" "DEPENDS;HEADERS;ALSO_SEES" ${ARGN})
  if(NOT tandem_layer_arg_FOLDER OR NOT IS_DIRECTORY ${PROJECT_SOURCE_DIR}/src/${tandem_layer_arg_FOLDER})
    message(FATAL_ERROR "tandem_layer(${layer}): FOLDER must name a folder of src/")
  endif()
  set(TANDEM_LAYER_FOLDER_${layer} ${tandem_layer_arg_FOLDER})
  list(APPEND TANDEM_LAYER_FOLDERS ${tandem_layer_arg_FOLDER})
  set(TANDEM_LAYER_HEADERS_${layer} ${tandem_layer_arg_HEADERS})
  set(TANDEM_LAYER_DEPENDS_${layer} ${tandem_layer_arg_DEPENDS})
  list(APPEND TANDEM_OWNED_PUBLIC_HEADERS ${tandem_layer_arg_HEADERS})
  # The layers it sees: itself and everything below it.
  set(TANDEM_LAYER_SEES_${layer} ${layer})
  foreach(dep ${tandem_layer_arg_DEPENDS})
    if(NOT DEFINED TANDEM_LAYER_SEES_${dep})
      message(FATAL_ERROR "tandem_layer(${layer}): declare the layer '${dep}' before it")
    endif()
    list(APPEND TANDEM_LAYER_SEES_${layer} ${TANDEM_LAYER_SEES_${dep}})
  endforeach()
  list(REMOVE_DUPLICATES TANDEM_LAYER_SEES_${layer})

  set(view ${TANDEM_LAYER_ROOT}/${layer})
  set(TANDEM_LAYER_VIEW_${layer} ${view})
  file(REMOVE_RECURSE ${view})
  file(MAKE_DIRECTORY ${view}/tandem)
  set(view_headers ${tandem_layer_arg_ALSO_SEES})
  foreach(seen ${TANDEM_LAYER_SEES_${layer}})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${TANDEM_LAYER_FOLDER_${seen}}
         ${view}/${TANDEM_LAYER_FOLDER_${seen}} SYMBOLIC)
    list(APPEND view_headers ${TANDEM_LAYER_HEADERS_${seen}})
  endforeach()
  foreach(header ${view_headers})
    if(NOT EXISTS ${PROJECT_SOURCE_DIR}/include/tandem/${header})
      message(FATAL_ERROR "tandem_layer(${layer}): include/tandem/${header} does not exist")
    endif()
    if(NOT EXISTS ${view}/tandem/${header})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/tandem/${header} ${view}/tandem/${header}
           SYMBOLIC)
    endif()
  endforeach()
  unset(view)
  unset(view_headers)
endmacro()

# Every public header belongs to exactly one layer, so a new one cannot slip past the views, and
# every folder of src/ is a layer's, so a new one is not left out of the build unnoticed.
function(tandem_check_layers)
  file(GLOB entries RELATIVE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/src/*)
  foreach(entry ${entries})
    if(IS_DIRECTORY ${PROJECT_SOURCE_DIR}/src/${entry})
      list(FIND TANDEM_LAYER_FOLDERS ${entry} found)
      if(found EQUAL -1)
        message(FATAL_ERROR "src/${entry} belongs to no layer: declare it with tandem_layer() in "
                            "CMakeLists.txt (and in docs/ARCHITECTURE.md's table)")
      endif()
    endif()
  endforeach()
  file(GLOB headers RELATIVE ${PROJECT_SOURCE_DIR}/include/tandem CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/include/tandem/*.h)
  foreach(header ${headers})
    list(FIND TANDEM_OWNED_PUBLIC_HEADERS ${header} found)
    if(found EQUAL -1)
      message(FATAL_ERROR "include/tandem/${header} belongs to no layer: add it to the HEADERS "
                          "of its layer's tandem_layer() in CMakeLists.txt")
    endif()
  endforeach()
  set(owned ${TANDEM_OWNED_PUBLIC_HEADERS})
  list(REMOVE_DUPLICATES owned)
  list(LENGTH owned unique)
  list(LENGTH TANDEM_OWNED_PUBLIC_HEADERS all)
  if(NOT unique EQUAL all)
    message(FATAL_ERROR "a public header is listed under two layers: ${TANDEM_OWNED_PUBLIC_HEADERS}")
  endif()
endfunction()

macro(tandem_add_layer_library layer)
  cmake_parse_arguments(tandem_lib_arg "" "TYPE;TARGET;EXCLUDE_REGEX" "" ${ARGN})
  if(NOT tandem_lib_arg_TYPE)
    set(tandem_lib_arg_TYPE OBJECT)
  endif()
  if(NOT tandem_lib_arg_TARGET)
    set(tandem_lib_arg_TARGET tandem_${layer})
  endif()
  file(GLOB_RECURSE tandem_lib_sources CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/src/${TANDEM_LAYER_FOLDER_${layer}}/*.cpp)
  if(tandem_lib_arg_EXCLUDE_REGEX)
    list(FILTER tandem_lib_sources EXCLUDE REGEX "${tandem_lib_arg_EXCLUDE_REGEX}")
  endif()
  add_library(${tandem_lib_arg_TARGET} ${tandem_lib_arg_TYPE} ${tandem_lib_sources})
  target_include_directories(${tandem_lib_arg_TARGET} PRIVATE ${TANDEM_LAYER_VIEW_${layer}})
  target_compile_options(${tandem_lib_arg_TARGET} PRIVATE ${TANDEM_COMPILE_OPTIONS})
  if(tandem_lib_arg_TYPE STREQUAL "OBJECT")
    # The layers below it: their usage requirements (Threads from core), never their includes
    # (those are private to each) nor, object libraries having no link step, their objects.
    foreach(dep ${TANDEM_LAYER_DEPENDS_${layer}})
      target_link_libraries(${tandem_lib_arg_TARGET} PUBLIC tandem_${dep})
    endforeach()
    list(APPEND TANDEM_LIBRARY_LAYERS ${layer})
  endif()
  # A library of another type (the CLI's commands) links libtandem.a instead, which holds the
  # objects of all library layers once.
  unset(tandem_lib_sources)
endmacro()
