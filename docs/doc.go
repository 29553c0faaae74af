// Package docs holds no code: it is the home of the guides' tests.
// docs_test.go keeps docs/workshop.md and docs/operations.md in step with the
// code: every lab's expected outcome is the load runner's matrix, its command
// uses only real flags and selects exactly its cells, every line range it
// points at still holds the line it names, one lab and the persistence lab
// run for real, and the flags, variables, Redis URLs and figures that
// operations.md quotes are checked against the binaries and the source.
package docs
