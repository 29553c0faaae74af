package traffic

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// TestAttackHangsUp: an attack's connections are closed when it ends, so a
// run's later steps are not measured beside every earlier step's idle
// shoppers. The server keeps idle connections forever here: only the
// runner's hang-up can close them.
func TestAttackHangsUp(t *testing.T) {
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	closed := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		switch s {
		case http.StateNew:
			open[c] = true
		case http.StateClosed, http.StateHijacked:
			delete(open, c)
			select {
			case closed <- struct{}{}:
			default:
			}
		}
	}
	srv.Start()
	defer srv.Close()
	openNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(open)
	}

	tr := vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodGet, URL: srv.URL})
	answered := 0
	Attack(context.Background(), 64, tr, vegeta.Rate{Freq: 500, Per: time.Second}, 200*time.Millisecond, "hang-up", func(r *vegeta.Result) {
		if r.Code == http.StatusNoContent {
			answered++
		}
	})
	if answered == 0 {
		t.Fatal("no request was answered: the attack never reached the server")
	}
	deadline := time.After(10 * time.Second)
	for openNow() > 0 {
		select {
		case <-closed:
		case <-deadline:
			t.Fatalf("%d of the attack's connections still open 10s after it ended", openNow())
		}
	}
}
