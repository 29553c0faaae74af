package output

import "io"

// ErrWriter remembers the first write error, so a report can be written
// with plain Fprintf calls and checked once, in Err.
type ErrWriter struct {
	W   io.Writer
	Err error
}

// Write writes p, unless an earlier write failed.
func (e *ErrWriter) Write(p []byte) (int, error) {
	if e.Err != nil {
		return 0, e.Err
	}
	n, err := e.W.Write(p)
	e.Err = err
	return n, err
}
