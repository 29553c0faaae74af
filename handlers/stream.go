package handlers

import (
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// stream serves GET /api/stream: server-sent events, one `data:` line of
// JSON per change, and a comment as heartbeat so proxies keep it open. It
// counts against the stream limits and ends on shutdown.
func (s *Server) stream(c *gin.Context) error {
	done, err := s.openStream(c)
	if err != nil {
		return err
	}
	defer done()
	msgs, cancel := s.broker.Subscribe()
	defer cancel()
	s.metrics.streamLive.Inc()
	defer s.metrics.streamLive.Dec()

	w := c.Writer
	rc := http.NewResponseController(w)
	extendWrite(rc)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(200)
	if _, err := fmt.Fprint(w, "retry: 2000\n: connected\n\n"); err != nil {
		return nil
	}
	w.Flush()

	beat := time.NewTicker(s.heartbeat)
	defer beat.Stop()
	ctx := c.Request.Context()
	for {
		var err error
		extendWrite(rc)
		select {
		case <-ctx.Done():
			return nil
		case <-s.closing:
			return nil
		case msg, ok := <-msgs:
			if !ok {
				return nil
			}
			_, err = fmt.Fprintf(w, "data: %s\n\n", msg)
		case <-beat.C:
			_, err = fmt.Fprint(w, ": heartbeat\n\n")
		}
		if err != nil {
			return nil // the client went away; nothing left to tell it
		}
		w.Flush()
	}
}

// StreamWriteWindow is how long one write to a stream may take. The server's
// write timeout (main's http.Server) bounds a whole answer, which a stream
// never finishes; a stream moves its connection's write deadline this far
// ahead before each write instead, so a client that stops reading is cut
// off after it, and one that reads stays as long as it likes.
const StreamWriteWindow = 30 * time.Second

// extendWrite moves the connection's write deadline StreamWriteWindow ahead.
// A writer without deadlines (a test recorder) has nothing to move.
func extendWrite(rc *http.ResponseController) {
	_ = rc.SetWriteDeadline(time.Now().Add(StreamWriteWindow))
}
