#include <iostream>

#include "tandem/runtime.h"

int main() {
  std::cout << "tandem " << tandem::version() << "\n";
  return 0;
}
