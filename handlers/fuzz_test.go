package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/gin-gonic/gin"
)

// The decoding of every JSON body the app accepts, fuzzed: `go test -run
// '^$' -fuzz '^FuzzDecodeOrder$' ./handlers/` (.ci/run runs each target
// for a bounded time). A crasher the fuzzer finds lands in
// testdata/fuzz/<target>/ and stays there as a seed.

// decodeBody runs decode on body as a POST with a JSON content type.
func decodeBody(body []byte, v any, limit int64, allowEmpty bool) (empty bool, err error) {
	gin.SetMode(gin.ReleaseMode) // as NewServer sets it: no debug output
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest("POST", "/", bytes.NewReader(body))
	c.Request.Header.Set("Content-Type", "application/json")
	return decode(c, v, limit, allowEmpty)
}

// checkDecode holds for every body and every request type: decode never
// panics; a refusal is a client error from the table, never a 500; and it
// agrees with encoding/json told to refuse unknown fields, which is what
// decode's own unknown-field walk stands for. An accepted body survives a
// round trip through JSON unchanged.
func checkDecode[T any](t *testing.T, body []byte, limit int64, allowEmpty bool) {
	var got T
	empty, err := decodeBody(body, &got, limit, allowEmpty)
	if err != nil {
		e, ok := errors.AsType[*Error](err)
		if !ok {
			t.Fatalf("%q: an error outside the table: %v", body, err)
		}
		if out, ok := errorTable[e.Code]; !ok || out.status < 400 || out.status >= 500 {
			t.Fatalf("%q: code %q is not a client error of the table", body, e.Code)
		}
	}
	if empty || int64(len(body)) > limit {
		return
	}
	var strict T
	strictErr := json.Unmarshal(body, &strict) // syntax, types, trailing data
	if strictErr == nil {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		strictErr = dec.Decode(new(T))
	}
	if strictErr == nil && string(bytes.TrimSpace(body)) == "null" {
		// encoding/json takes null as an object left empty; decode wants
		// an object, as null asks for nothing.
		strictErr = errors.New("the body is null, not an object")
	}
	switch {
	case err == nil && strictErr != nil:
		t.Fatalf("%q: decode accepted a body encoding/json refuses: %v", body, strictErr)
	case err != nil && strictErr == nil:
		t.Fatalf("%q: decode refused (%v) a body encoding/json accepts as %+v", body, err, strict)
	case err != nil:
		return
	}
	if !reflect.DeepEqual(got, strict) {
		t.Fatalf("%q: decode made %+v, encoding/json %+v", body, got, strict)
	}
	again, merr := json.Marshal(got)
	if merr != nil {
		t.Fatalf("%+v does not encode: %v", got, merr)
	}
	var back T
	if _, err := decodeBody(again, &back, 1<<20, false); err != nil {
		t.Fatalf("%q: its own encoding %s is refused: %v", body, again, err)
	}
	if twice, _ := json.Marshal(back); !bytes.Equal(again, twice) {
		t.Fatalf("%q: round trip changed %s into %s", body, again, twice)
	}
}

var orderSeeds = []string{
	`{"sku":"hot","qty":1,"user":"ann"}`,
	`{"SKU":"hot","Qty":2,"User":"bob"}`,
	`{"sku":"hot","qty":1,"user":"ann","extra":1}`,
	`{"sku":"hot","qty":"1","user":"ann"}`,
	`{"sku":"hot","qty":1.5}`,
	`{"sku":"hot"} {"sku":"x"}`,
	`[1,2]`, `null`, `""`, ` `, `{`, `{"qty":99999999999999999999}`,
	"{\"s\u212au\":\"hot\"}", "{\"\u017fku\":\"hot\"}",
}

func FuzzDecodeOrder(f *testing.F) {
	for _, s := range orderSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkDecode[orderRequest](t, body, smallBody, false) })
}

func FuzzDecodeSeat(f *testing.F) {
	for _, s := range append(orderSeeds, `{"user":"ann"}`, `{"user":null}`, `{"User":"x","user":"y"}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkDecode[seatRequest](t, body, smallBody, false) })
}

// FuzzDecodeAdmin feeds one body to each admin route's decoding: the reset
// (empty allowed), the fault plan and a workshop run.
func FuzzDecodeAdmin(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"seats":0}`, `{"products":[]}`,
		`{"products":[{"sku":"hot","name":"Hot","price_cents":1,"stock":5}],"seats":10}`,
		`{"products":[{"sku":"hot","nope":1}]}`, `{"products":{"sku":"x"}}`, `{"products":null,"seats":null}`,
		`{"seed":1,"work_ms":0,"faults":[{"point":"in-critical-section","action":"pause","p":1,"ms":5}]}`,
		`{"seed":1,"faults":[{"point":"x","action":"crash","p":2}]}`, `{"fired":{}}`, `{"batch":true}`,
		`{"variant":"lua","scenario":"clean","rate":10,"duration_s":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecode[resetRequest](t, body, resetBody, true)
		checkDecode[faultPlan](t, body, smallBody, false)
		checkDecode[runRequest](t, body, smallBody, false)
	})
}
