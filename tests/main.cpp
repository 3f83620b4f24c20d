// The Catch2 (v2) entry point for the qkgrad test suite.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
