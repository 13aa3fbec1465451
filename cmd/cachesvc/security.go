package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strings"
	"time"

	"github.com/cachesvc/cachesvc/api"
	"github.com/cachesvc/cachesvc/api/auth"
	"github.com/cachesvc/cachesvc/api/proxyaddr"
)

// securityOptions are serve's flags for authentication, TLS, signing and
// limits.
type securityOptions struct {
	Tokens         string
	InsecureNoAuth bool
	TLS            auth.TLSFiles
	SigningKey     string

	ReadTimeout          time.Duration
	WriteTimeout         time.Duration
	MinTransferRate      int64
	MaxHeaderSize        int64
	MaxConns             int
	MaxConnsPerAddr      int
	MaxConcurrentUploads int
	RateLimit            float64
	RateBurst            int
	IPv6ClientPrefix     int
	TrustedProxies       *proxyaddr.Trusted
}

// register defines the flags on fs.
func (o *securityOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.Tokens, "tokens", "", "tokens `file` (name, sha256 of the token, namespace:scope list per line; see `cachesvc token new`); reloaded on SIGHUP. Without it the server does no authentication")
	fs.BoolVar(&o.InsecureNoAuth, "insecure-no-auth", false, "allow serving without --tokens on a non-loopback address")
	fs.StringVar(&o.TLS.Cert, "tls-cert", "", "TLS certificate chain `file` (PEM); serves HTTPS")
	fs.StringVar(&o.TLS.Key, "tls-key", "", "TLS private key `file` (PEM)")
	fs.StringVar(&o.TLS.ClientCA, "tls-client-ca", "", "CA bundle `file` (PEM): require client certificates signed by it (mutual TLS)")
	fs.StringVar(&o.SigningKey, "signing-key", "", "Ed25519 private key `file` (FILE from `cachesvc signkey new --out FILE`; FILE.pub is the public key clients verify with): sign every entry response (X-Cachesvc-Signature)")
	// api.Limits reads a timeout of 0 or less as its 30s default, so 0
	// would quietly not mean "no limit"; none is offered, since an unbounded
	// read lets a slow client hold a connection forever.
	durationVar(fs, &o.ReadTimeout, "read-timeout", 30*time.Second, positiveDuration, "a positive duration, e.g. 30s (requests are always paced)", "time to send request headers; also the slack a request body gets beyond --min-transfer-rate (must be positive)")
	durationVar(fs, &o.WriteTimeout, "write-timeout", 30*time.Second, positiveDuration, "a positive duration, e.g. 30s (responses are always paced)", "slack a response gets beyond --min-transfer-rate (must be positive)")
	sizeVar(fs, &o.MinTransferRate, "min-transfer-rate", 64<<10, "slowest body transfer tolerated, bytes per second (a slower client is cut off after the timeout's slack)")
	sizeVar(fs, &o.MaxHeaderSize, "max-header-size", 16<<10, "largest request line and header block, 1KiB to 1MiB (431 past it; each connection holds a read buffer this large)")
	fs.IntVar(&o.MaxConns, "max-conns", 0, "HTTP connections open at once, idle keep-alive ones included; one more gets 503 too_many_connections with Retry-After (0 = the open-files limit less 1024 kept for the store, at most 65536; -1 = unbounded)")
	fs.IntVar(&o.MaxConnsPerAddr, "max-conns-per-addr", 0, "HTTP connections open at once from one client address (each IPv6 address alone, or by --ipv6-client-prefix), counted at accept; one more gets 503 too_many_connections. Loopback and --trusted-proxies are exempt; behind another reverse proxy every connection has its address: list it in --trusted-proxies, raise this or set -1 (0 = half of --max-conns; -1 = unbounded)")
	fs.IntVar(&o.MaxConcurrentUploads, "max-concurrent-uploads", 64, "entry uploads in progress at once; more get 503 with Retry-After (-1 = unbounded)")
	fs.Float64Var(&o.RateLimit, "rate-limit", 0, "requests per second per token (per client address when anonymous, IPv6 as --ipv6-client-prefix groups it); more get 429 with Retry-After (0 = unlimited)")
	fs.IntVar(&o.IPv6ClientPrefix, "ipv6-client-prefix", 128, "prefix length, 1 to 128, by which IPv6 client addresses count as one client for --max-conns-per-addr, the anonymous --rate-limit and upload share, and anonymous reporters. 128: each address alone, as hosts of one network share a prefix (an AWS subnet is one /64 for all its instances); 64 on a server facing the internet, where one host may hold a /64 and send from any address in it")
	fs.IntVar(&o.RateBurst, "rate-burst", 0, "requests a token may make at once above --rate-limit (0 = twice the rate)")
	fs.Func("trusted-proxies", "comma-separated `CIDRs` or addresses of reverse proxies whose X-Forwarded-For names the client, e.g. 127.0.0.1,10.0.0.0/8 (default none: the client is the connection's peer; never list addresses that clients reach the server from directly)", func(s string) error {
		tp, err := proxyaddr.Parse(s)
		if err != nil {
			return err
		}
		o.TrustedProxies = tp
		return nil
	})
}

// check refuses the security flags whose values would quietly mean something
// other than they say (exit 2, as every flag error).
func (o securityOptions) check() error {
	if o.MinTransferRate == 0 {
		// api.Limits reads 0 as its 64KiB default, so 0 would quietly not
		// mean "no minimum".
		return usagef("--min-transfer-rate 0: want a positive rate, e.g. 64KiB (bodies are always paced)")
	}
	// api.Limits reads 0 as its default and any negative value as no
	// bound, so 0 would quietly mean 64 and -5 a typo for -1.
	if n := o.MaxConcurrentUploads; n == 0 || n < -1 {
		return usagef("--max-concurrent-uploads %d: want at least 1, or -1 for no bound", n)
	}
	// A negative rate turned limiting off and a negative burst meant the
	// default: neither is what the number says.
	if r := o.RateLimit; r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return usagef("--rate-limit %v: want 0 (no limit) or a positive rate, requests per second", r)
	}
	if o.RateBurst < 0 {
		return usagef("--rate-burst %d: want 0 (twice --rate-limit) or more", o.RateBurst)
	}
	if p := o.IPv6ClientPrefix; p < 1 || p > 128 {
		return usagef("--ipv6-client-prefix %d: want a prefix length from 1 to 128 (128: each IPv6 address is its own client; 64: a /64 is one)", p)
	}
	if h := o.MaxHeaderSize; h < minHeaderSize || h > maxHeaderSize {
		return usagef("--max-header-size %s is out of range: use %s to %s, e.g. 16KiB (each connection holds a read buffer this large)",
			formatSize(h), formatSize(minHeaderSize), formatSize(maxHeaderSize))
	}
	return nil
}

// apply loads the tokens file, TLS files and signing key into cfg and
// checks that addr is not exposed without authentication. It runs before
// the store is opened, so a bad file stops serve at once with a message
// naming it (and, for the tokens file, the line).
func (o securityOptions) apply(addr string, cfg *api.Config, logger *slog.Logger) error {
	if err := auth.CheckExposure(addr, o.Tokens != "", o.InsecureNoAuth); err != nil {
		return err
	}
	if o.Tokens != "" {
		g, err := auth.NewGuard(o.Tokens, logger)
		if err != nil {
			return fmt.Errorf("load tokens: %w", err)
		}
		cfg.Auth = g
		logger.Info("authentication on", "tokens_file", o.Tokens, "tokens", g.Tokens().Len())
	} else {
		logger.Warn("authentication off: every request is allowed", "addr", addr)
	}
	if o.TLS.Enabled() {
		tc, err := o.TLS.Config()
		if err != nil {
			return err
		}
		cfg.TLS = tc
	}
	if o.SigningKey != "" {
		s, err := loadSigningKey(o.SigningKey) // keyfiles.go
		if err != nil {
			return err
		}
		cfg.Signer = s
	}
	cfg.Limits = api.Limits{
		ReadTimeout:          o.ReadTimeout,
		WriteTimeout:         o.WriteTimeout,
		MinTransferRate:      o.MinTransferRate,
		MaxHeaderBytes:       int(o.MaxHeaderSize),
		MaxConns:             o.MaxConns,
		MaxConnsPerAddr:      o.MaxConnsPerAddr,
		MaxConcurrentUploads: o.MaxConcurrentUploads,
		RequestsPerSecond:    o.RateLimit,
		Burst:                o.RateBurst,
		IPv6ClientPrefix:     o.IPv6ClientPrefix,
	}
	if o.TrustedProxies != nil {
		cfg.TrustedProxies = o.TrustedProxies
		logger.Info("client addresses from X-Forwarded-For of trusted proxies", "trusted_proxies", o.TrustedProxies.String())
	}
	return nil
}

// reloadOnSIGHUP, on every SIGHUP until ctx ends, reloads g's tokens file
// (if g is set) and then calls each of reloads in order (the --plugins
// directory, the --namespaces file). Each reload is all or nothing on its
// own: a bad tokens file keeps the tokens in force (the guard logs why), a
// bad plugin directory the plugins, a bad namespaces file the quotas.
// With nothing to reload, SIGHUP is logged and ignored: its default action
// would end the process with no graceful shutdown, and logrotate and
// config tools send it routinely. hup is the channel signal.Notify delivers
// SIGHUP to, set up by the caller before its start began, so that one sent
// meanwhile is not the end of the process but a reload as soon as this
// runs; the caller stops it.
func reloadOnSIGHUP(ctx context.Context, hup <-chan os.Signal, log *slog.Logger, g *auth.Guard, reloads ...func(context.Context)) {
	if g == nil && len(reloads) == 0 {
		reloads = append(reloads, func(context.Context) {
			log.Info("SIGHUP: nothing to reload (no --tokens, --namespaces or --plugins); still serving")
		})
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if g != nil {
					_ = g.Reload() // it logs the outcome
				}
				for _, r := range reloads {
					r(ctx)
				}
			}
		}
	}()
}

// tokenSource is the --token and --token-file flags of client subcommands:
// a token given directly (or as CACHESVC_TOKEN), or read from a file (or
// CACHESVC_TOKEN_FILE). tokenFromEnv and fileFromEnv say which came from the
// environment, so that a flag on the command line beats the other's variable.
type tokenSource struct {
	token, file               string
	tokenFromEnv, fileFromEnv bool
}

// envString is a string flag that records whether its value came from the
// environment (parseFlags calls markFromEnv) or from the command line (Set,
// which parseFlags calls after the environment's).
type envString struct {
	p       *string
	fromEnv *bool
}

func (v envString) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v envString) Set(s string) error {
	*v.p, *v.fromEnv = s, false
	return nil
}

// markFromEnv is called by parseFlags right after it set the value from a
// CACHESVC_* variable.
func (v envString) markFromEnv() { *v.fromEnv = true }

// addTokenFlags defines --token and --token-file on fs.
func addTokenFlags(fs *flag.FlagSet) *tokenSource {
	ts := &tokenSource{}
	fs.Var(envString{&ts.token, &ts.tokenFromEnv}, "token", "bearer `token` for the server (prefer --token-file: flags show in ps)")
	fs.Var(envString{&ts.file, &ts.fileFromEnv}, "token-file", "`file` holding the bearer token (first line)")
	return ts
}

// resolve returns the token: --token, else the first line of --token-file,
// else "". When both are set, the one given on the command line wins over
// the other's environment variable (CACHESVC_TOKEN_FILE exported in a
// profile must not refuse a --token given for one command); both on the
// command line, or both in the environment, is a usage error.
func (ts *tokenSource) resolve() (string, error) {
	if ts.token != "" && ts.file != "" {
		switch {
		case ts.tokenFromEnv && !ts.fileFromEnv:
			ts.token = ""
		case ts.fileFromEnv && !ts.tokenFromEnv:
			ts.file = ""
		case ts.tokenFromEnv:
			return "", usagef("CACHESVC_TOKEN and CACHESVC_TOKEN_FILE are both set: unset one (or give --token or --token-file, which wins over them)")
		default:
			return "", usagef("give --token or --token-file, not both")
		}
	}
	if ts.token != "" {
		return ts.token, nil
	}
	if ts.file == "" {
		return "", nil
	}
	b, err := os.ReadFile(ts.file)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	tok, _, _ := strings.Cut(string(b), "\n")
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return "", fmt.Errorf("read token file %s: it is empty", ts.file)
	}
	return tok, nil
}

// tokenGroup is `cachesvc token new`.
var tokenGroup = group{name: "token", summary: "Make bearer tokens for the server's tokens file (serve --tokens).",
	subs: []command{{"new", "make a random token and its tokens-file line", runTokenNew}}}

// runToken is `cachesvc token new --name N [--scopes LIST]`.
func runToken(ctx context.Context, args []string, sio stdio) error {
	return tokenGroup.run(ctx, args, sio)
}

// runTokenNew is `cachesvc token new`.
func runTokenNew(ctx context.Context, args []string, sio stdio) error {
	var name, scopes string
	fs := newFlagSet("token new", "Make a fresh random bearer token. Prints the token (shown once: keep it secret) and the line to add to the server's tokens file; then send the server SIGHUP.", sio)
	fs.StringVar(&name, "name", "", "token `name`, recorded as the writer of entries it stores (required)")
	fs.StringVar(&scopes, "scopes", "default:read", "comma-separated `namespace:scope` grants; scope is read, write or admin; namespace * means all")
	if err := parseOperandless(fs, args, sio); err != nil {
		return err
	}
	if name == "" {
		return usagef("--name is required")
	}
	if err := auth.ValidateName(name); err != nil {
		return usagef("--name: %s", err)
	}
	if name == auth.AnonymousName {
		return usagef("--name: %q is reserved for requests without a token: to grant read without one, add the line \"anonymous - NAMESPACE:read\" to the tokens file", name)
	}
	sc, err := auth.ParseScopes(scopes)
	if err != nil {
		return usagef("--scopes: %s", err)
	}
	tok, err := auth.NewToken()
	if err != nil {
		return err
	}
	line, err := auth.FormatRule(name, auth.HashToken(tok), sc)
	if err != nil {
		return usagef("%s", err)
	}
	fmt.Fprintf(sio.Stdout, "token: %s\nline: %s\n", tok, line)
	fmt.Fprintf(sio.Stderr, "Add the line to the tokens file and send the server SIGHUP. The token is not stored anywhere: keep it now.\n")
	return nil
}

// signKeyGroup is `cachesvc signkey new`.
var signKeyGroup = group{name: "signkey", summary: "Make Ed25519 key pairs for signing entries (serve --signing-key).",
	subs: []command{{"new", "make a key pair: FILE (private) and FILE.pub", runSignKeyNew}}}

// runSignKey is `cachesvc signkey new --out FILE`.
func runSignKey(ctx context.Context, args []string, sio stdio) error {
	return signKeyGroup.run(ctx, args, sio)
}

// runSignKeyNew is `cachesvc signkey new`.
func runSignKeyNew(ctx context.Context, args []string, sio stdio) error {
	var out string
	fs := newFlagSet("signkey new", "Make an Ed25519 key pair for signing entries: FILE (private, mode 0600) for serve --signing-key, FILE.pub for clients.", sio)
	fs.StringVar(&out, "out", "", "private key `file` to create (the public key goes to FILE.pub)")
	if err := parseOperandless(fs, args, sio); err != nil {
		return err
	}
	if out == "" {
		return usagef("--out is required")
	}
	pub, err := auth.WriteKeyPair(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(sio.Stdout, "private key: %s\npublic key: %s.pub\npublic key (base64): %s\n", out, out, auth.EncodePublicKey(pub))
	return nil
}
