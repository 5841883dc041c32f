// gangkeeper: the binary's entry point.
#include "src/cli/commands.h"

int main(int argc, char** argv) { return gangkeeper::cli::RunMain(argc, argv); }
