package resp

import (
	"errors"
	"log/slog"
	"strconv"
	"strings"

	"github.com/cachesvc/cachesvc/api/auth"
)

// command is one entry of the command table.
type command struct {
	name string // lower case, as in Redis's arity errors
	// minArgs and maxArgs bound the arguments, the name included; maxArgs
	// < 0 means no bound beyond the connection's.
	minArgs, maxArgs int
	// beforeAuth: the command runs without a token (AUTH, HELLO, QUIT).
	beforeAuth bool
	run        func(c *conn, args [][]byte)
	index      int // in commandList; the metrics' series are by index
}

// commands is the command table, by lower-case name.
var commands = map[string]*command{}

// commandList is the table in the order the unknown-command error lists
// it.
var commandList = []*command{
	{name: "get", minArgs: 2, maxArgs: 2, run: cmdGet},
	{name: "set", minArgs: 3, maxArgs: 8, run: cmdSet},
	{name: "mget", minArgs: 2, maxArgs: -1, run: cmdMGet},
	{name: "exists", minArgs: 2, maxArgs: -1, run: cmdExists},
	{name: "ping", minArgs: 1, maxArgs: 2, run: cmdPing},
	{name: "echo", minArgs: 2, maxArgs: 2, run: cmdEcho},
	{name: "auth", minArgs: 2, maxArgs: 3, beforeAuth: true, run: cmdAuth},
	{name: "hello", minArgs: 1, maxArgs: 7, beforeAuth: true, run: cmdHello},
	{name: "client", minArgs: 2, maxArgs: -1, run: cmdClient},
	{name: "select", minArgs: 2, maxArgs: 2, run: cmdSelect},
	{name: "quit", minArgs: 1, maxArgs: -1, beforeAuth: true, run: cmdQuit},
}

// unknownCommand counts commands the table does not have.
var unknownCommand = &command{name: "unknown", index: -1}

// spoken lists the commands for the unknown-command error.
var spoken string

func init() {
	names := make([]string, len(commandList))
	unknownCommand.index = len(commandList)
	for i, cmd := range commandList {
		cmd.index = i
		commands[cmd.name] = cmd
		names[i] = strings.ToUpper(cmd.name)
	}
	spoken = strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// lookupCommand finds a command by its name in any case.
func lookupCommand(name []byte) *command {
	if len(name) > 16 {
		return nil
	}
	var lower [16]byte
	for i, ch := range name {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		lower[i] = ch
	}
	return commands[string(lower[:len(name)])]
}

// dispatch runs one command and counts it.
func (c *conn) dispatch(args [][]byte) {
	c.result = resultOK
	c.startReply()
	cmd := lookupCommand(args[0])
	switch {
	case cmd == nil:
		cmd = unknownCommand
		c.replyErrorf("ERR unknown command '%s'; cachesvc's RESP listener speaks %s", quoted(args[0]), spoken)
	case len(args) < cmd.minArgs || cmd.maxArgs >= 0 && len(args) > cmd.maxArgs:
		c.replyErrorf("ERR wrong number of arguments for '%s' command", cmd.name)
	case !cmd.beforeAuth && !c.mayProceed():
		c.noAuth(cmd.name)
	default:
		c.running = cmd.name
		cmd.run(c, args)
	}
	c.s.metrics.count(cmd, c.result)
	if c.s.log.Enabled(c.ctx(), slog.LevelDebug) {
		sub := ""
		if (cmd.name == "client" || cmd.name == "hello") && len(args) > 1 {
			sub = quoted(args[1])
		}
		c.s.log.Debug("resp command", "client", c.client(), "command", quoted(args[0]), "sub", sub,
			"args", len(args)-1, "result", resultNames[c.result])
	}
}

// mayProceed reports whether the connection may run commands: the server
// checks no tokens, AUTH accepted one, or the tokens file grants anonymous
// read in the namespace.
func (c *conn) mayProceed() bool {
	g := c.s.cfg.Auth
	if g == nil || c.secret != "" {
		return true
	}
	_, err := g.Authorize("", c.s.cfg.Namespace, auth.ScopeRead)
	return err == nil
}

// allow checks the connection's token for scope need in the namespace,
// every time (a reloaded tokens file takes effect at once), and answers
// NOAUTH or NOPERM when it falls short.
func (c *conn) allow(need auth.Scope) bool {
	g := c.s.cfg.Auth
	if g == nil {
		return true
	}
	id, err := g.Authorize(c.secret, c.s.cfg.Namespace, need)
	switch {
	case err == nil:
		c.ident = id
		return true
	case errors.Is(err, auth.ErrForbidden):
		c.replyErrorf("NOPERM token '%s' lacks %s scope in namespace '%s'", id.Name, need, c.s.cfg.Namespace)
	case c.secret != "":
		c.replyError("NOAUTH the token AUTH accepted is no longer in the tokens file; AUTH again")
	default:
		c.noAuth(c.running)
	}
	return false
}

// noAuth answers NOAUTH to a command sent without a token, and logs it once
// per connection. The client side is silent: torch's Redis backend turns its
// remote cache off for the process on the error and compiles everything, so
// the server's log is the only place a missing password shows.
func (c *conn) noAuth(command string) {
	c.replyError("NOAUTH Authentication required.")
	c.logNoAuth(command)
}

// logNoAuth logs a NOAUTH answered to command, once per connection.
func (c *conn) logNoAuth(command string) {
	if !c.noauthLogged {
		c.noauthLogged = true
		c.s.log.Info("resp command refused: the client sent no token (NOAUTH), so it gets no cache "+
			"(torch turns its remote cache off for the process); give a token as the Redis password, "+
			"e.g. TORCHINDUCTOR_REDIS_URL=redis://:TOKEN@host:port", "client", c.client(), "command", command,
			"namespace", c.s.cfg.Namespace)
	}
}

// writer is what an entry records as its writer: the token's name, or the
// client address without authentication.
func (c *conn) writer() string {
	if c.s.cfg.Auth != nil && c.ident.Name != "" {
		return c.ident.Name
	}
	return c.client()
}

// client is the connection's client address, its IP without the port, as
// logs name it (key "client", as the HTTP API's request lines do).
func (c *conn) client() string {
	host := c.remote
	if i := strings.LastIndexByte(host, ':'); i > 0 {
		host = strings.Trim(host[:i], "[]")
	}
	return host
}

// cmdPing: PING [message].
func cmdPing(c *conn, args [][]byte) {
	if len(args) == 2 {
		c.replyBulk(args[1])
		return
	}
	c.replyString("PONG")
}

// cmdEcho: ECHO message.
func cmdEcho(c *conn, args [][]byte) { c.replyBulk(args[1]) }

// cmdQuit: QUIT. The connection closes after the reply.
func cmdQuit(c *conn, _ [][]byte) {
	c.replyOK()
	c.quit = true
}

// cmdSelect: SELECT 0. The listener serves one namespace, as database 0.
func cmdSelect(c *conn, args [][]byte) {
	if n, err := strconv.Atoi(string(args[1])); err != nil || n != 0 {
		c.replyErrorf("ERR DB index is out of range: cachesvc's RESP listener serves namespace '%s' as database 0", c.s.cfg.Namespace)
		return
	}
	c.replyOK()
}

// cmdAuth: AUTH token, or AUTH user token. The user name is ignored: the
// token alone says who the client is. Without authentication any AUTH is
// accepted, as the HTTP API ignores bearer tokens then.
func cmdAuth(c *conn, args [][]byte) {
	if c.authenticate(args[len(args)-1]) {
		c.replyOK()
	}
}

// authenticate checks a token and makes it the connection's; on failure it
// answers WRONGPASS and keeps the previous token.
func (c *conn) authenticate(token []byte) bool {
	g := c.s.cfg.Auth
	if g == nil {
		return true
	}
	id, err := g.Authenticate(string(token))
	if err != nil || id.Anonymous {
		c.replyError("WRONGPASS invalid username-password pair or user is disabled.")
		// Once per connection, as NOAUTH: a client guessing tokens
		// pipelines AUTH after AUTH, and a line each filled the log as
		// fast as it sent. The commands metric counts every refusal.
		if c.wrongpassLogged {
			return false
		}
		c.wrongpassLogged = true
		c.s.log.Info("resp AUTH refused: unknown token, so the client gets no cache (torch turns its remote cache "+
			"off for the process); check the Redis password (TORCHINDUCTOR_REDIS_URL=redis://:TOKEN@host:port) "+
			"against --tokens; later refusals on this connection are only counted (cachesvc_resp_commands_total)", "client", c.client())
		return false
	}
	c.secret, c.ident = string(token), id
	return true
}

// cmdHello: HELLO [protover [AUTH user token] [SETNAME name]]. It answers
// the server's properties as a map, in RESP3 when protover is 3.
func cmdHello(c *conn, args [][]byte) {
	proto := 2
	if c.resp3 {
		proto = 3
	}
	if len(args) >= 2 {
		n, err := strconv.Atoi(string(args[1]))
		if err != nil {
			c.replyError("ERR Protocol version is not an integer or out of range")
			return
		}
		if n != 2 && n != 3 {
			c.replyError("NOPROTO unsupported protocol version")
			return
		}
		proto = n
	}
	var token, name []byte
	for i := 2; i < len(args); i++ {
		switch opt := strings.ToLower(string(args[i])); {
		case opt == "auth" && i+2 < len(args):
			token = args[i+2]
			i += 2
		case opt == "setname" && i+1 < len(args):
			name = args[i+1]
			i++
		default:
			c.replyErrorf("ERR Syntax error in HELLO option '%s'", quoted(args[i]))
			return
		}
	}
	if token != nil {
		if !c.authenticate(token) {
			return
		}
	} else if !c.mayProceed() {
		// redis-py 8 (torch's backend) opens every connection with HELLO 3.
		c.replyError("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		c.logNoAuth("hello")
		return
	}
	if name != nil && !c.setName(name) {
		return
	}
	c.resp3 = proto == 3
	c.replyMap(7)
	c.replyBulkString("server")
	c.replyBulkString("cachesvc")
	c.replyBulkString("version")
	c.replyBulkString(c.s.cfg.Version)
	c.replyBulkString("proto")
	c.replyInt(int64(proto))
	c.replyBulkString("id")
	c.replyInt(c.id)
	c.replyBulkString("mode")
	c.replyBulkString("standalone")
	c.replyBulkString("role")
	c.replyBulkString("master")
	c.replyBulkString("modules")
	c.replyArray(0)
}

// cmdClient: CLIENT SETINFO, SETNAME, GETNAME and ID, what redis-py sends on
// connect and asks back.
func cmdClient(c *conn, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	arity := map[string]int{"setinfo": 4, "setname": 3, "getname": 2, "id": 2}
	want, known := arity[sub]
	switch {
	case sub == "maint_notifications":
		// redis-py 8 asks on every connection and, like with a Redis
		// older than 7.4 that answers "unknown subcommand", takes any
		// error as "not supported" and carries on.
		c.replyUnsupported("ERR CLIENT MAINT_NOTIFICATIONS is not supported: cachesvc sends no maintenance notifications")
	case !known:
		c.replyErrorf("ERR unknown subcommand '%s'; cachesvc's RESP listener speaks CLIENT SETINFO, SETNAME, GETNAME and ID", quoted(args[1]))
	case len(args) != want:
		c.replyErrorf("ERR wrong number of arguments for 'client|%s' command", sub)
	case sub == "setinfo":
		switch strings.ToLower(string(args[2])) {
		case "lib-name", "lib-ver":
			c.replyOK()
		default:
			c.replyErrorf("ERR Unrecognized option '%s'", quoted(args[2]))
		}
	case sub == "setname":
		if c.setName(args[2]) {
			c.replyOK()
		}
	case sub == "getname":
		if c.name == "" {
			c.replyNull()
			return
		}
		c.replyBulkString(c.name)
	default: // id
		c.replyInt(c.id)
	}
}

// setName sets the connection's name (CLIENT SETNAME, HELLO SETNAME), or
// answers why not.
func (c *conn) setName(name []byte) bool {
	if len(name) > 256 {
		c.replyError("ERR Client names are limited to 256 bytes")
		return false
	}
	for _, ch := range name {
		if ch <= ' ' || ch > '~' {
			c.replyError("ERR Client names cannot contain spaces, newlines or special characters.")
			return false
		}
	}
	c.name = string(name)
	return true
}
