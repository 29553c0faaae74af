// Package docs holds no code: it is the home of the guides' tests. They keep
// the documents in step with the code: every lab (docs/labs/) expects what
// the load runner's matrix expects, its command uses only real flags and
// selects exactly its cells, every line range it points at still holds the
// line it names, one lab and the persistence lab run for real; every cell
// any document restates is the runner's, and every file and function a
// document names exists; docs/matrix.md's table is the runner's matrix and
// docs/handout.md the labs' Run, Expect and Verify, both written by
// `go test ./docs -run 'TestMatrixDoc|TestHandout' -update`; docs/api.md documents every
// flag of `flashsale -h`; the README stays a landing page that names every
// package; and the flags, variables, Redis URLs and figures that
// operations.md quotes are checked against the binaries and the source.
package docs
