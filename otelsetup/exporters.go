// Copyright The otelomni Authors
// SPDX-License-Identifier: Apache-2.0

package otelsetup

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	prometheusbridge "go.opentelemetry.io/contrib/bridges/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	promexporter "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutlog"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"

	"github.com/otelomni/otelomni/internal/sanitize"
)

// Setup builds every exporter itself, from what readEnv read, and hands
// each setting to it as an option: the exporters read the same variables
// themselves, and an option wins over their reading. A value Setup
// ignored therefore never takes effect, and one the exporters would read
// otherwise (a name in capitals, a padded value, which they trim) takes
// the effect Setup says.

// NewSpanExporter returns the span exporter that [Setup] builds from the
// environment: OTEL_TRACES_EXPORTER (otlp, the default; console; none)
// and the OTLP variables, read as Setup reads them (a value that is not
// valid is warned about through the OpenTelemetry error handler and
// ignored). It is nil when OTEL_TRACES_EXPORTER is none.
//
// A program that exports spans outside Setup, such as the recovery of
// crash journals with [Recover], gives it this exporter: a collector's
// partial success (a batch accepted with spans rejected) is then counted
// as such, from the collector's answer, and not as a failed export.
func NewSpanExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	env, warnings := readEnv()
	for _, w := range warnings {
		if w.Name == "OTEL_TRACES_EXPORTER" || strings.HasPrefix(w.Name, "OTEL_EXPORTER_OTLP_") &&
			!strings.Contains(w.Name, "_METRICS_") && !strings.Contains(w.Name, "_LOGS_") {
			otel.Handle(w)
		}
	}
	exp, _, err := newSpanExporter(ctx, env)
	return exp, err
}

// otlpDest is where and how the OTLP exporter of one signal sends.
type otlpDest struct {
	protocol string // grpc or http/protobuf
	// url is the URL an HTTP exporter posts to; a gRPC exporter dials its
	// host.
	url     url.URL
	headers map[string]string
	timeout time.Duration
	gzip    bool
	// tls configures TLS; nil sends in the clear.
	tls *tls.Config
	// exporterGzip says the exporter reads gzip from the environment
	// itself, which only an option can undo.
	exporterGzip bool
}

// otlpDest returns the destination of the signal s ("TRACES_",
// "METRICS_", "LOGS_"): each variable the signal's own, else the general
// one, else the default.
func (e *environ) otlpDest(s string) otlpDest {
	d := otlpDest{protocol: "http/protobuf"}
	if _, p := e.signal(s, "PROTOCOL"); p != "" {
		d.protocol = strings.ToLower(p)
	}
	port, signalPath := "4318", "/v1/"+strings.ToLower(strings.TrimSuffix(s, "_"))
	if d.protocol == "grpc" {
		port = "4317"
	}
	secure := true
	if name, v := e.signal(s, "ENDPOINT"); v != "" {
		u, _ := url.Parse(v) // isEndpoint parsed it
		d.url, secure = *u, u.Scheme == "https"
		switch {
		case name == "OTEL_EXPORTER_OTLP_ENDPOINT":
			// A base URL: each signal its path below it.
			d.url.Path = path.Join("/", u.Path, signalPath)
			d.url.RawPath = ""
		case u.Path == "":
			d.url.Path = "/" // a signal's own URL is used as it is
		}
	} else {
		// The exporters' default: TLS, unless the insecure switch says
		// otherwise.
		_, insecure := e.signal(s, "INSECURE")
		secure = !strings.EqualFold(insecure, "true")
		d.url = url.URL{Scheme: "https", Host: "localhost:" + port, Path: signalPath}
		if !secure {
			d.url.Scheme = "http"
		}
	}
	_, h := e.signal(s, "HEADERS")
	d.headers = headers(h)
	d.timeout = e.duration(defaultOTLPTimeout, "OTEL_EXPORTER_OTLP_"+s+"TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
	_, c := e.signal(s, "COMPRESSION")
	d.gzip = strings.EqualFold(c, "gzip")
	d.exporterGzip = exporterReadsGzip(s)
	if secure {
		d.tls = &tls.Config{}
		if name, _ := e.signal(s, "CERTIFICATE"); name != "" {
			d.tls.RootCAs = e.roots[strings.TrimSuffix(name, "CERTIFICATE")]
		}
		for _, p := range []string{"OTEL_EXPORTER_OTLP_" + s, "OTEL_EXPORTER_OTLP_"} {
			if pair, ok := e.pairs[p]; ok && !e.notFor[s][p+"CLIENT_CERTIFICATE"] {
				d.tls.Certificates = []tls.Certificate{pair}
				break
			}
		}
	}
	return d
}

// exporterReadsGzip reports whether the OTLP exporters of the signal s,
// reading the environment themselves, would compress: they trim the
// value and compare it to gzip as written, the signal's own first.
func exporterReadsGzip(s string) bool {
	v := strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_" + s + "COMPRESSION"))
	if v == "" {
		v = strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_COMPRESSION"))
	}
	return v == "gzip"
}

// describe says where the exporter sends, for a start-up log line.
func (d otlpDest) describe() string {
	u := d.url
	if d.protocol == "grpc" {
		u.Path, u.RawPath = "", ""
	}
	return fmt.Sprintf("otlp (%s) to %s", d.protocol, sanitize.URL(u.String(), 256))
}

// grpcCredentials are the transport credentials: an option, so that a
// certificate the environment names is used only with TLS.
func (d otlpDest) grpcCredentials() credentials.TransportCredentials {
	if d.tls == nil {
		return insecure.NewCredentials()
	}
	return credentials.NewTLS(d.tls)
}

// grpcDialOptions returns the dial options that undo the exporter's own
// reading of the compression: the exporters trim the value and would
// compress one that Setup ignored (" gzip"), and their option takes only
// gzip. A call option given later wins over theirs.
func (d otlpDest) grpcDialOptions() []grpc.DialOption {
	if !d.gzip && d.exporterGzip {
		return []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.UseCompressor(encoding.Identity))}
	}
	return nil
}

// transport returns the HTTP transport of an exporter: the OTLP HTTP
// exporters' own settings (those of net/http's DefaultTransport), with
// the TLS configuration.
func transport(tlsCfg *tls.Config) *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
		TLSClientConfig:       tlsCfg,
	}
}

// newSpanExporter returns the span exporter the environment selects and
// a description of where it sends; nil for none.
func newSpanExporter(ctx context.Context, e *environ) (sdktrace.SpanExporter, string, error) {
	switch e.lower("OTEL_TRACES_EXPORTER") {
	case "none":
		return nil, "none", nil
	case "console":
		exp, err := stdouttrace.New()
		if err != nil {
			return nil, "", err
		}
		return exp, "console", nil
	}
	d := e.otlpDest("TRACES_")
	var (
		exp sdktrace.SpanExporter
		err error
	)
	if d.protocol == "grpc" {
		opts := []otlptracegrpc.Option{
			otlptracegrpc.WithEndpoint(d.url.Host),
			otlptracegrpc.WithTLSCredentials(d.grpcCredentials()),
			otlptracegrpc.WithHeaders(d.headers),
			otlptracegrpc.WithTimeout(d.timeout),
			otlptracegrpc.WithDialOption(append(d.grpcDialOptions(), grpc.WithChainUnaryInterceptor(answerInterceptor))...),
		}
		if d.gzip {
			opts = append(opts, otlptracegrpc.WithCompressor("gzip"))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	} else {
		compression := otlptracehttp.NoCompression
		if d.gzip {
			compression = otlptracehttp.GzipCompression
		}
		// The exporter's own client, but for its transport, which reads
		// the collector's answer (see answerTransport).
		client := &http.Client{Transport: answerTransport{base: transport(d.tls)}, Timeout: d.timeout}
		exp, err = otlptracehttp.New(ctx,
			otlptracehttp.WithEndpointURL(d.url.String()),
			otlptracehttp.WithHTTPClient(client),
			// The client carries TLS: an environment's certificate must
			// not make the exporter refuse an http:// endpoint.
			otlptracehttp.WithTLSClientConfig(nil),
			otlptracehttp.WithHeaders(d.headers),
			otlptracehttp.WithTimeout(d.timeout),
			otlptracehttp.WithCompression(compression),
			otlptracehttp.WithEncoding(otlptracehttp.EncodingProtobuf))
	}
	if err != nil {
		return nil, "", fmt.Errorf("otelsetup: setting up the span exporter: %w", err)
	}
	return exp, d.describe(), nil
}

// newMetricReader returns the metric reader the environment selects and
// a description of where it sends; nil for none.
func newMetricReader(ctx context.Context, e *environ) (sdkmetric.Reader, string, error) {
	kind := e.lower("OTEL_METRICS_EXPORTER")
	switch kind {
	case "none":
		return nil, "none", nil
	case "prometheus":
		return newPrometheusReader(e)
	}
	var producers []sdkmetric.Producer
	for _, p := range producerNames(e.str("OTEL_METRICS_PRODUCERS")) {
		if p == "prometheus" {
			producers = append(producers, prometheusbridge.NewMetricProducer())
		}
	}
	exp, desc, err := newMetricExporter(ctx, e)
	if err != nil {
		return nil, "", err
	}
	return sdkmetric.NewPeriodicReader(exp, periodicOptions(e, producers)...), desc, nil
}

// newMetricExporter returns the push exporter of metrics,
// OTEL_METRICS_EXPORTER's console or otlp, and a description of where it
// sends.
func newMetricExporter(ctx context.Context, e *environ) (sdkmetric.Exporter, string, error) {
	var (
		exp  sdkmetric.Exporter
		desc = "console"
		err  error
	)
	if e.lower("OTEL_METRICS_EXPORTER") == "console" {
		exp, err = stdoutmetric.New()
	} else {
		d := e.otlpDest("METRICS_")
		desc = d.describe()
		temporality, aggregation := metricSelectors(e)
		if d.protocol == "grpc" {
			opts := []otlpmetricgrpc.Option{
				otlpmetricgrpc.WithEndpoint(d.url.Host),
				otlpmetricgrpc.WithTLSCredentials(d.grpcCredentials()),
				otlpmetricgrpc.WithHeaders(d.headers),
				otlpmetricgrpc.WithTimeout(d.timeout),
				otlpmetricgrpc.WithDialOption(d.grpcDialOptions()...),
				otlpmetricgrpc.WithTemporalitySelector(temporality),
				otlpmetricgrpc.WithAggregationSelector(aggregation),
			}
			if d.gzip {
				opts = append(opts, otlpmetricgrpc.WithCompressor("gzip"))
			}
			exp, err = otlpmetricgrpc.New(ctx, opts...)
		} else {
			compression := otlpmetrichttp.NoCompression
			if d.gzip {
				compression = otlpmetrichttp.GzipCompression
			}
			exp, err = otlpmetrichttp.New(ctx,
				otlpmetrichttp.WithEndpointURL(d.url.String()),
				otlpmetrichttp.WithTLSClientConfig(d.tls),
				otlpmetrichttp.WithHeaders(d.headers),
				otlpmetrichttp.WithTimeout(d.timeout),
				otlpmetrichttp.WithCompression(compression),
				otlpmetrichttp.WithTemporalitySelector(temporality),
				otlpmetrichttp.WithAggregationSelector(aggregation))
		}
	}
	if err != nil {
		return nil, "", fmt.Errorf("otelsetup: setting up the metric exporter: %w", err)
	}
	return exp, desc, nil
}

// periodicOptions are the periodic reader's options: the SDK reads
// OTEL_METRIC_EXPORT_INTERVAL and _TIMEOUT itself, and an option wins.
func periodicOptions(e *environ, producers []sdkmetric.Producer) []sdkmetric.PeriodicReaderOption {
	opts := []sdkmetric.PeriodicReaderOption{
		sdkmetric.WithInterval(e.duration(defaultMetricInterval, "OTEL_METRIC_EXPORT_INTERVAL")),
		sdkmetric.WithTimeout(e.duration(defaultMetricTimeout, "OTEL_METRIC_EXPORT_TIMEOUT")),
	}
	for _, p := range producers {
		opts = append(opts, sdkmetric.WithProducer(p))
	}
	return opts
}

// metricSelectors are the temporality and the histogram aggregation of
// the OTLP metric exporters, as the exporters read
// OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE and
// OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION.
func metricSelectors(e *environ) (sdkmetric.TemporalitySelector, sdkmetric.AggregationSelector) {
	temporality := sdkmetric.CumulativeTemporalitySelector
	switch e.lower("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE") {
	case "delta":
		temporality = sdkmetric.DeltaTemporalitySelector
	case "lowmemory":
		temporality = sdkmetric.LowMemoryTemporalitySelector
	}
	aggregation := sdkmetric.DefaultAggregationSelector
	if e.lower("OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION") == "base2_exponential_bucket_histogram" {
		aggregation = func(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
			if k == sdkmetric.InstrumentKindHistogram {
				return sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: 20}
			}
			return sdkmetric.DefaultAggregationSelector(k)
		}
	}
	return temporality, aggregation
}

// newPrometheusReader serves the metrics for Prometheus on
// OTEL_EXPORTER_PROMETHEUS_HOST and _PORT, at /metrics.
func newPrometheusReader(e *environ) (sdkmetric.Reader, string, error) {
	reg := prometheus.NewRegistry()
	reader, err := promexporter.New(promexporter.WithRegisterer(reg))
	if err != nil {
		return nil, "", fmt.Errorf("otelsetup: setting up the Prometheus exporter: %w", err)
	}
	host := e.str("OTEL_EXPORTER_PROMETHEUS_HOST")
	if host == "" {
		host = "localhost"
	}
	addr := host + ":" + strconv.Itoa(e.int(defaultPrometheusPort, "OTEL_EXPORTER_PROMETHEUS_PORT"))
	lis, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, "", errors.Join(fmt.Errorf("otelsetup: the Prometheus exporter cannot listen on %s: %w", addr, err),
			reader.Shutdown(context.Background()))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	server := &http.Server{ReadTimeout: 5 * time.Second, WriteTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, Handler: mux}
	go func() {
		if err := server.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			otel.Handle(fmt.Errorf("otelsetup: the Prometheus HTTP server exited: %w", err))
		}
	}()
	return readerWithServer{Reader: reader, server: server, lis: lis}, "prometheus on http://" + addr + "/metrics", nil
}

// readerWithServer is the Prometheus reader and the server it is scraped
// through, shut down together.
type readerWithServer struct {
	sdkmetric.Reader
	server *http.Server
	lis    net.Listener
}

// Shutdown stops the reader and the server. The listener is closed here,
// before Shutdown returns: the server, if its goroutine has not begun to
// serve yet, would close it only then, and the port would stay bound.
func (r readerWithServer) Shutdown(ctx context.Context) error {
	err := errors.Join(r.Reader.Shutdown(ctx), r.server.Shutdown(ctx))
	if cerr := r.lis.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
		err = errors.Join(err, cerr)
	}
	return err
}

// newLogExporter returns the log exporter OTEL_LOGS_EXPORTER selects, nil
// when it is unset or none: logs are exported only when asked for, as a
// trace backend such as Jaeger refuses them.
func newLogExporter(ctx context.Context, e *environ) (sdklog.Exporter, error) {
	var (
		exp sdklog.Exporter
		err error
	)
	switch e.lower("OTEL_LOGS_EXPORTER") {
	case "", "none":
		return nil, nil
	case "console":
		exp, err = stdoutlog.New()
	default:
		d := e.otlpDest("LOGS_")
		if d.protocol == "grpc" {
			opts := []otlploggrpc.Option{
				otlploggrpc.WithEndpoint(d.url.Host),
				otlploggrpc.WithTLSCredentials(d.grpcCredentials()),
				otlploggrpc.WithHeaders(d.headers),
				otlploggrpc.WithTimeout(d.timeout),
				otlploggrpc.WithDialOption(d.grpcDialOptions()...),
			}
			if d.gzip {
				opts = append(opts, otlploggrpc.WithCompressor("gzip"))
			}
			exp, err = otlploggrpc.New(ctx, opts...)
		} else {
			compression := otlploghttp.NoCompression
			if d.gzip {
				compression = otlploghttp.GzipCompression
			}
			exp, err = otlploghttp.New(ctx,
				otlploghttp.WithEndpointURL(d.url.String()),
				otlploghttp.WithTLSClientConfig(d.tls),
				otlploghttp.WithHeaders(d.headers),
				otlploghttp.WithTimeout(d.timeout),
				otlploghttp.WithCompression(compression))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("otelsetup: setting up the log exporter: %w", err)
	}
	return exp, nil
}
