// Command upstreamcol is an OpenTelemetry Collector built from upstream
// components only (the ones deploy/collector.yaml uses, at the versions
// Jaeger v1.76.0 embeds), with no Jaeger code: running the fleet tests with
// it shows that the collector tier's configuration does not depend on
// Jaeger. `make fleet-upstream` builds it and runs them.
package main

import (
	"log"

	"github.com/open-telemetry/opentelemetry-collector-contrib/connector/spanmetricsconnector"
	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusexporter"
	"github.com/open-telemetry/opentelemetry-collector-contrib/extension/healthcheckv2extension"
	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/tailsamplingprocessor"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/batchprocessor"
	"go.opentelemetry.io/collector/processor/memorylimiterprocessor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func main() {
	factories := func() (otelcol.Factories, error) {
		f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
		var err error
		if f.Extensions, err = otelcol.MakeFactoryMap[extension.Factory](healthcheckv2extension.NewFactory()); err != nil {
			return f, err
		}
		if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
			return f, err
		}
		if f.Processors, err = otelcol.MakeFactoryMap[processor.Factory](memorylimiterprocessor.NewFactory(), tailsamplingprocessor.NewFactory(), batchprocessor.NewFactory()); err != nil {
			return f, err
		}
		if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](otlpexporter.NewFactory(), prometheusexporter.NewFactory()); err != nil {
			return f, err
		}
		f.Connectors, err = otelcol.MakeFactoryMap[connector.Factory](spanmetricsconnector.NewFactory())
		return f, err
	}
	cmd := otelcol.NewCommand(otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "upstreamcol", Version: "check"},
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
		}},
	})
	if err := cmd.Execute(); err != nil {
		log.Fatal(err)
	}
}
