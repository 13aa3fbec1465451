package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// listen listens on addr, given as flag (--addr, --redis-addr), and when it
// cannot, says what to do: a port another process holds is the usual
// first-run failure (a second serve, another service on 8080), and "bind:
// address already in use" alone named neither the flag nor a way out.
func listen(flag, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	return nil, fmt.Errorf("listen on %s %s: %w%s", flag, addr, err, listenHint(flag, addr, err))
}

// listenHint is what to do about err, listening on addr given as flag, or
// "" when there is nothing to add.
func listenHint(flag, addr string, err error) string {
	host, port, splitErr := net.SplitHostPort(addr)
	if splitErr != nil {
		return ""
	}
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		other := net.JoinHostPort(host, "0") + " for a free one, which serve prints"
		if flag != "--addr" { // only the API's URL is printed at start
			n, _ := strconv.Atoi(port)
			other = net.JoinHostPort(host, strconv.Itoa(n+1))
		}
		return fmt.Sprintf(" (another process listens there, perhaps another cachesvc serve: stop it, or give %s another port, e.g. %s %s)", flag, flag, other)
	case errors.Is(err, syscall.EACCES):
		return fmt.Sprintf(" (ports below 1024 need privileges: give %s a port from 1024 up)", flag)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Sprintf(" (%s is not an address of this host: give %s 127.0.0.1:%s, or one of this host's addresses)", host, flag, port)
	}
	return ""
}
