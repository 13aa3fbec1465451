package resp

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the listener's Prometheus metrics. The lookups and writes
// themselves are counted by api.Outcomes (route "resp").
type metrics struct {
	accepted prometheus.Counter
	refused  prometheus.Counter
	commands *prometheus.CounterVec // command, result
	// byCommand are commands' series, by command index and result,
	// resolved once.
	byCommand    [][numResults]prometheus.Counter
	protoErrors  *prometheus.CounterVec // reason
	parserPanics prometheus.Counter
	panics       prometheus.Counter
	received     prometheus.Counter
	sent         prometheus.Counter
}

// newMetrics creates the metrics and registers them on reg (none when nil),
// with gauges reading s's connections and buffered bytes.
func newMetrics(reg prometheus.Registerer, s *Server) (*metrics, error) {
	m := &metrics{
		accepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cachesvc_resp_connections_total",
			Help: "Connections the Redis-protocol listener accepted.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cachesvc_resp_connections_refused_total",
			Help: "Connections the Redis-protocol listener refused at --redis-max-conns.",
		}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cachesvc_resp_commands_total",
			Help: "Commands the Redis-protocol listener answered, by command (unknown for any other) and result (ok, error, noauth, noperm, wrongpass, unsupported: a capability probe such as CLIENT MAINT_NOTIFICATIONS that healthy clients send and the listener declines).",
		}, []string{"command", "result"}),
		protoErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cachesvc_resp_protocol_errors_total",
			Help: "Connections the Redis-protocol listener closed for a protocol fault, by reason (malformed, too_large, buffers_full).",
		}, []string{"reason"}),
		parserPanics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cachesvc_resp_parser_panics_total",
			Help: "Commands on which the RESP parser (redcon) panicked; each was answered as a protocol error.",
		}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cachesvc_resp_command_panics_total",
			Help: "Commands whose handling panicked (a bug): each closed its connection, logged with its stack; the listener kept serving.",
		}),
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cachesvc_resp_received_bytes_total",
			Help: "Bytes the Redis-protocol listener received.",
		}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cachesvc_resp_sent_bytes_total",
			Help: "Bytes the Redis-protocol listener sent.",
		}),
	}
	all := append(append([]*command(nil), commandList...), unknownCommand)
	m.byCommand = make([][numResults]prometheus.Counter, len(all))
	for _, cmd := range all {
		for r := range numResults {
			m.byCommand[cmd.index][r] = m.commands.WithLabelValues(cmd.name, resultNames[r])
		}
	}
	if reg == nil {
		return m, nil
	}
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cachesvc_resp_connections",
		Help: "Open connections to the Redis-protocol listener.",
	}, func() float64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return float64(len(s.conns))
	})
	buffered := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "cachesvc_resp_buffered_bytes",
		Help: "Bytes of input buffers the Redis-protocol listener's connections hold (bounded by --redis-max-buffered).",
	}, func() float64 { return float64(s.buffered.Load()) })
	for _, c := range []prometheus.Collector{m.accepted, m.refused, m.commands, m.protoErrors, m.parserPanics,
		m.panics, m.received, m.sent, open, buffered} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// count counts one command's result.
func (m *metrics) count(cmd *command, r resultKind) { m.byCommand[cmd.index][r].Inc() }
