// Package curriculum is what the workshop teaches about each rung of the
// lock ladder, and what a run expects of it. Package lock declares the
// rungs and what the library needs of them (name, file, guard, fencing,
// correctness); this package holds, for every rung by name, the rest: the
// paragraph the workshop shows beside its code (why/<rung>.md), the file of
// the correct rung it is read beside, the matrix column that shows it, the
// columns where it breaks, may go either way, is promised nothing or has no
// cell, and what it must do under the chaos runner's faults.
//
// Its readers are the load runner (loadtest: the expected matrix, which
// docs/matrix.md is generated from, and the workshop's sequence), the chaos
// runner (loadtest/chaos) and the workshop page's source view (web). The
// library and the app's request path never read it.
package curriculum
