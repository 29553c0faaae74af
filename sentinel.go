package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// errSentinelURL is a -redis-sentinel value that is not
// redis-sentinel://[:password@]host:port[,host:port…]/mastername.
var errSentinelURL = errors.New("want redis-sentinel://[:password@]host:port[,host:port…]/mastername")

// sentinelOptions parses -redis-sentinel: the sentinels to ask and the name
// of the master they watch. A password in the URL is the data nodes'; the
// sentinels are asked without one.
func sentinelOptions(raw string) (*redis.FailoverOptions, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errSentinelURL, err)
	}
	if u.Scheme != "redis-sentinel" {
		return nil, fmt.Errorf("%w: scheme %q", errSentinelURL, u.Scheme)
	}
	name := strings.Trim(u.Path, "/")
	if name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("%w: master name %q", errSentinelURL, u.Path)
	}
	fo := &redis.FailoverOptions{MasterName: name}
	for _, addr := range strings.Split(u.Host, ",") {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%w: sentinel %q: %w", errSentinelURL, addr, err)
		}
		fo.SentinelAddrs = append(fo.SentinelAddrs, addr)
	}
	if u.User != nil {
		fo.Username = u.User.Username()
		fo.Password, _ = u.User.Password()
	}
	return fo, nil
}
