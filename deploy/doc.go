// Package deploy holds no code: it is the home of the deployment files'
// tests. deploy_test.go checks that docker-compose.yml, the Dockerfile,
// deploy/prometheus and deploy/redis are in step with the code they deploy:
// the compose file parses (docker-compose config), names only flags and
// variables the binaries know and starts a working app; the Dockerfile builds
// both commands with cgo; every metric and label an alert rule uses is one
// the running app exports; the Redis ACL and TLS settings of
// docs/operations.md work against a real redis-server. stack_test.go starts
// the whole compose stack on a Docker engine (with deploy/offline's
// stand-ins where no registry is reachable) and takes it through node
// kills, a partition, a Redis restart with and without its AOF and a
// PostgreSQL outage.
package deploy
