/* A program that initializes MPI and exits with status 1 without creating a Starling
 * context: what a replacement does when its script fails after MPI_Init (e.g. at an
 * mpi4py import). Started by tests/fault/grow_never_joins.py through a grow. */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  exit(1);
}
