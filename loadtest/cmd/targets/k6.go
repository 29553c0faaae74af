package main

import (
	"io"
	"text/template"
)

// k6Script is the same sale for k6: an open model (constant-arrival-rate,
// as vegeta's), each iteration a distinct user and Idempotency-Key, and 409
// counted as an expected answer so http_req_failed counts only what is not
// one of the sale's answers.
var k6Script = template.Must(template.New("k6").Parse(`// A flash sale for k6, written by: go run ./loadtest/cmd/targets -format k6
// Run: k6 run sale.js   (reset the sale first: targets -reset, or POST /api/admin/reset)
import http from 'k6/http';
import exec from 'k6/execution';
import { check } from 'k6';
import { Counter } from 'k6/metrics';

// Every answer by status and error code: vegeta's and k6's own error lists say only "503", which is lock_busy or overloaded.
const answerCodes = new Counter('flashsale_answers');

const BASE = __ENV.FLASHSALE_URL || {{printf "%q" .URL}};

export const options = {
  scenarios: {
    sale: {
      executor: 'constant-arrival-rate', // open model: arrivals keep their schedule while answers are slow
      rate: {{.Rate}}, timeUnit: '1s', duration: '{{.Seconds}}s',
      preAllocatedVUs: 128, maxVUs: 128, // the in-flight cap; past it k6 counts dropped_iterations
    },
  },
};

// 201 a sale; 409 sold_out once the stock is gone: both are the sale's right answers.
const answers = http.expectedStatuses(201, 409);

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
  check(res, { 'sold or sold out': (r) => r.status === 201 || r.status === 409 });
}
`))

// writeK6 writes the k6 script of the sale.
func (s sale) writeK6(w io.Writer) error {
	return k6Script.Execute(w, map[string]any{
		"URL": s.url, "SKU": s.sku, "Variant": s.variant, "Tag": s.tag,
		"Rate": s.rate, "Seconds": int(s.duration.Seconds()),
	})
}
