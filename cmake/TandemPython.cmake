# The Python package, `import tandem as tf` (python/tandem/ over the native module of
# src/python/): built when the Python interpreter CMake uses (the Makefile passes the project
# virtualenv's, scripts/python-env.sh python) has nanobind. The build puts the whole package
# together in <build>/python/tandem/ (the pure-Python files copied, the native module beside
# them), which `make test`'s pytest imports. `pip wheel .` builds the same package with
# scikit-build-core (pyproject.toml) and installs the COMPONENT python files below into the wheel.
option(TANDEM_PYTHON "Build the Python package when nanobind is found" ON)
set(TANDEM_PYTHON_BUILT OFF)
if(TANDEM_PYTHON AND TANDEM_SANITIZE)
  # A sanitized module would need the sanitizers' run-time preloaded into the interpreter.
  message(STATUS "Python package: not built under the sanitizers")
elseif(TANDEM_PYTHON)
  find_package(Python 3.9 COMPONENTS Interpreter Development.Module)
  if(Python_FOUND)
    execute_process(COMMAND ${Python_EXECUTABLE} -m nanobind --cmake_dir
      OUTPUT_VARIABLE tandem_nanobind_dir OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE tandem_nanobind_status ERROR_QUIET)
    if(tandem_nanobind_status EQUAL 0)
      find_package(nanobind CONFIG PATHS ${tandem_nanobind_dir} NO_DEFAULT_PATH)
    endif()
  endif()
  if(nanobind_FOUND)
    set(TANDEM_PYTHON_BUILT ON)
    message(STATUS "Python package: built with ${Python_EXECUTABLE}")
  else()
    message(STATUS "Python package: not built (no nanobind for ${Python_EXECUTABLE}; "
                   "scripts/python-env.sh python installs it into .venv)")
  endif()
endif()

if(TANDEM_PYTHON_BUILT)
  set(TANDEM_PYTHON_PACKAGE_DIR ${CMAKE_BINARY_DIR}/python/tandem)
  file(GLOB_RECURSE tandem_python_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/python/*.cpp)
  # NB_STATIC: nanobind's own library compiled into the module (one module, nothing to vendor).
  nanobind_add_module(tandem_python NB_STATIC ${tandem_python_sources})
  set_target_properties(tandem_python PROPERTIES OUTPUT_NAME _native
    LIBRARY_OUTPUT_DIRECTORY ${TANDEM_PYTHON_PACKAGE_DIR})
  target_include_directories(tandem_python PRIVATE ${TANDEM_LAYER_VIEW_python})
  target_compile_options(tandem_python PRIVATE ${TANDEM_COMPILE_OPTIONS})
  target_link_libraries(tandem_python PRIVATE tandem nlohmann_json::nlohmann_json)
  # The pure-Python files, copied beside the module at every build (a cheap, changed-only copy).
  add_custom_target(tandem_python_files ALL
    COMMAND ${CMAKE_COMMAND} -E copy_directory ${PROJECT_SOURCE_DIR}/python/tandem
            ${TANDEM_PYTHON_PACKAGE_DIR}
    COMMENT "Python package: python/tandem -> ${TANDEM_PYTHON_PACKAGE_DIR}")
  add_dependencies(tandem_python tandem_python_files)
  install(TARGETS tandem_python LIBRARY DESTINATION tandem COMPONENT python)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/tandem/ DESTINATION tandem COMPONENT python
          FILES_MATCHING PATTERN "*.py" PATTERN "py.typed" PATTERN "__pycache__" EXCLUDE)
endif()
