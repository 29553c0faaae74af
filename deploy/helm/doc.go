// Package helm holds no code: it is the home of the Helm chart's checks,
// a module of its own so that the Kubernetes API types they decode against
// stay out of the storefront's go.mod. The tests render deploy/helm/flashsale
// with `helm template` (the default values and production.yaml), decode every
// object strictly against the API types, and check what the app and Redlock
// need of them: probe paths, port and variables the app knows
// (deploy/app.json, kept equal to the code by the storefront's
// contract_test.go), drain timings, five masters on five machines,
// noeviction, pinned images, the alert rules of deploy/prometheus.
package helm
