package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/template"

	"flashsale/loadtest/traffic"
)

// k6Script is the same sale for k6: an open model (constant-arrival-rate,
// as vegeta's), each iteration a distinct user and Idempotency-Key, 409
// counted as an expected answer so http_req_failed counts only what is not
// one of the sale's answers, and every answer's duration in a Trend of its
// outcome (traffic.Outcomes), so that the sales' percentiles are not the
// sold-outs'. The options, thresholds included, are JSON written by
// k6Options: the SLO's targets on the sales' Trend and the shed Rate.
var k6Script = template.Must(template.New("k6").Parse(`// A flash sale for k6, written by: go run ./loadtest/cmd/targets -format k6
// Run: k6 run sale.js   (reset the sale first: targets -reset, or POST /api/admin/reset)
// The thresholds are the SLO {{.SLO}}: k6 exits non-zero when the sale misses it.
import http from 'k6/http';
import exec from 'k6/execution';
import { check } from 'k6';
import { Counter, Rate, Trend } from 'k6/metrics';

// Every answer by status and error code: vegeta's and k6's own error lists say only "503", which is lock_busy or overloaded.
const answerCodes = new Counter('flashsale_answers');
// The duration of each outcome apart: a sale (a 2xx that made an order), a replay (a 2xx answered from the
// record of a key already confirmed), refused (4xx but 429: sold_out …), shed (503, 429), error (anything else).
const outcomes = {
{{- range .Outcomes}}
  {{.}}: new Trend('flashsale_{{.}}_duration', true),
{{- end}}
};
// The share of requests shed: the SLO's other half.
const shed = new Rate('flashsale_shed');

const BASE = __ENV.FLASHSALE_URL || {{printf "%q" .URL}};

// scenarios: constant-arrival-rate is an open model (arrivals keep their schedule while answers are slow);
// maxVUs is the in-flight cap, past which k6 counts dropped_iterations.
export const options = {{.Options}};

// 201 a sale; 409 sold_out once the stock is gone: both are the sale's right answers.
const answers = http.expectedStatuses(201, 409);

function outcomeOf(res) {
  if (res.status >= 200 && res.status < 300) {
    return res.headers['Idempotent-Replay'] === 'true' ? 'replay' : 'sale';
  }
  if (res.status === 503 || res.status === 429) { return 'shed'; }
  if (res.status >= 400 && res.status < 500) { return 'refused'; }
  return 'error';
}

export default function () {
  const key = {{printf "%q" .Tag}} + '-' + exec.scenario.iterationInTest;
  const res = http.post(BASE + '/api/orders',
    JSON.stringify({ sku: {{printf "%q" .SKU}}, qty: 1, user: 'u-' + key }),
    {
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key{{if .Variant}}, 'X-Lock-Variant': {{printf "%q" .Variant}}{{end}} },
      responseCallback: answers,
      tags: { name: 'POST /api/orders' },
    });
  let code = '';
  try { code = res.json('error') || ''; } catch (e) { /* a 201 carries no error code */ }
  answerCodes.add(1, { status: String(res.status), error: code });
  const outcome = outcomeOf(res);
  outcomes[outcome].add(res.timings.duration);
  shed.add(outcome === 'shed');
  check(res, { 'sold or sold out': (r) => r.status === 201 || r.status === 409 });
}
`))

// k6Options is the script's options: the open-model scenario and the SLO's
// thresholds, on the sales' Trend and the shed Rate.
func (s sale) k6Options() map[string]any {
	return map[string]any{
		"scenarios": map[string]any{
			"sale": map[string]any{
				"executor": "constant-arrival-rate",
				"rate":     s.rate, "timeUnit": "1s", "duration": fmt.Sprintf("%ds", int(s.duration.Seconds())),
				"preAllocatedVUs": 128, "maxVUs": 128,
			},
		},
		"thresholds": map[string][]string{
			"flashsale_" + traffic.OutcomeSale + "_duration": {"p(99)<=" + strconv.FormatFloat(float64(s.slo.P99.Microseconds())/1000, 'f', -1, 64)},
			"flashsale_shed": {"rate<=" + strconv.FormatFloat(s.slo.Shed/100, 'f', -1, 64)},
		},
	}
}

// writeK6 writes the k6 script of the sale.
func (s sale) writeK6(w io.Writer) error {
	var opts strings.Builder
	enc := json.NewEncoder(&opts)
	enc.SetEscapeHTML(false) // "p(99)<=500" as k6's documentation writes it
	enc.SetIndent("", "  ")
	if err := enc.Encode(s.k6Options()); err != nil {
		return err
	}
	return k6Script.Execute(w, map[string]any{
		"URL": s.url, "SKU": s.sku, "Variant": s.variant, "Tag": s.tag,
		"Options": strings.TrimSpace(opts.String()), "Outcomes": traffic.Outcomes, "SLO": s.slo,
	})
}
