// A minimal cert-manager controller for the integration tests (test-only, never shipped).
//
// cert-manager's own main (cmd/controller, module .../controller-binary) is a nested module that
// the Go module proxy does not serve; the controllers themselves live in the published module
// github.com/cert-manager/cert-manager (version: CERT_MANAGER_VERSION in hack/versions.env).
// This file does what cmd/controller/app/controller.go's Run does, minus what a host process on
// loopback does not need: leader election, the metrics/healthz/profiling servers, ACME and the
// Gateway API. hack/build-binaries.sh builds it in a wrapper module whose path lies under
// github.com/cert-manager/cert-manager/ so it may import the module's internal/ packages (the
// controller configuration and its defaults).
//
// Flags (same names as the real controller's): --kubeconfig, --cluster-resource-namespace,
// --namespace, --controllers, --concurrent-workers, --leader-elect (only false), -v.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	config "github.com/cert-manager/cert-manager/internal/apis/config/controller"
	configscheme "github.com/cert-manager/cert-manager/internal/apis/config/controller/scheme"
	"github.com/cert-manager/cert-manager/pkg/acme/accounts"
	configv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/controller/v1alpha1"
	"github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/metrics"

	// Controllers and issuers register themselves in init() (as cmd/controller/app/start.go
	// imports them); ACME, Vault and Venafi are left out.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// The controllers a CA or self-signed issuer needs, end to end.
var defaultControllers = []string{
	"issuers", "clusterissuers",
	"certificaterequests-approver", "certificaterequests-issuer-ca",
	"certificaterequests-issuer-selfsigned",
	"certificates-trigger", "certificates-issuing", "certificates-key-manager",
	"certificates-request-manager", "certificates-readiness", "certificates-revision-manager",
}

func defaultedConfiguration() (*config.ControllerConfiguration, error) {
	scheme, _, err := configscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	versioned := &configv1alpha1.ControllerConfiguration{}
	scheme.Default(versioned)
	cfg := &config.ControllerConfiguration{}
	if err := scheme.Convert(versioned, cfg, nil); err != nil {
		return nil, err
	}
	return cfg, nil
}

func run(ctx context.Context, cfg *config.ControllerConfiguration, enabled []string) error {
	log := logf.FromContext(ctx)
	quantity := func(s string) resource.Quantity { return resource.MustParse(s) }
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         cfg.KubeConfig,
		KubernetesAPIQPS:   cfg.KubernetesAPIQPS,
		KubernetesAPIBurst: cfg.KubernetesAPIBurst,
		Namespace:          cfg.Namespace,
		Clock:              clock.RealClock{},
		Metrics:            metrics.New(log, clock.RealClock{}),
		ACMEOptions: controller.ACMEOptions{
			HTTP01SolverResourceRequestCPU:    quantity(cfg.ACMEHTTP01Config.SolverResourceRequestCPU),
			HTTP01SolverResourceRequestMemory: quantity(cfg.ACMEHTTP01Config.SolverResourceRequestMemory),
			HTTP01SolverResourceLimitsCPU:     quantity(cfg.ACMEHTTP01Config.SolverResourceLimitsCPU),
			HTTP01SolverResourceLimitsMemory:  quantity(cfg.ACMEHTTP01Config.SolverResourceLimitsMemory),
			AccountRegistry:                   accounts.NewDefaultRegistry(),
		},
		SchedulerOptions: controller.SchedulerOptions{MaxConcurrentChallenges: cfg.MaxConcurrentChallenges},
		IssuerOptions: controller.IssuerOptions{
			ClusterIssuerAmbientCredentials: cfg.ClusterIssuerAmbientCredentials,
			IssuerAmbientCredentials:        cfg.IssuerAmbientCredentials,
			ClusterResourceNamespace:        cfg.ClusterResourceNamespace,
		},
		CertificateOptions: controller.CertificateOptions{
			EnableOwnerRef:           cfg.EnableCertificateOwnerRef,
			CopiedAnnotationPrefixes: cfg.CopiedAnnotationPrefixes,
		},
	})
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}
	known := controller.Known()
	g, gctx := errgroup.WithContext(ctx)
	for _, name := range enabled {
		constructor, ok := known[name]
		if !ok {
			names := make([]string, 0, len(known))
			for n := range known {
				names = append(names, n)
			}
			sort.Strings(names)
			return fmt.Errorf("unknown controller %q (built in: %v)", name, names)
		}
		iface, err := constructor(factory)
		if err != nil {
			return fmt.Errorf("starting controller %s: %w", name, err)
		}
		log.Info("starting controller", "controller", name)
		g.Go(func() error { return iface.Run(int(cfg.NumberOfConcurrentWorkers), gctx) })
	}
	base.SharedInformerFactory.Start(gctx.Done())
	base.KubeSharedInformerFactory.Start(gctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(gctx.Done())
	err = g.Wait()
	base.HTTP01ResourceMetadataInformersFactory.Shutdown()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	return err
}

func main() {
	cfg, err := defaultedConfiguration()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fs := pflag.NewFlagSet("cert-manager-controller", pflag.ExitOnError)
	fs.StringVar(&cfg.KubeConfig, "kubeconfig", "", "path to a kubeconfig")
	fs.StringVar(&cfg.ClusterResourceNamespace, "cluster-resource-namespace", cfg.ClusterResourceNamespace,
		"namespace of the Secrets that ClusterIssuers reference")
	fs.StringVar(&cfg.Namespace, "namespace", "", "watch only this namespace (no ClusterIssuers)")
	fs.IntVar(&cfg.NumberOfConcurrentWorkers, "concurrent-workers", cfg.NumberOfConcurrentWorkers, "workers per controller")
	leaderElect := fs.Bool("leader-elect", false, "unsupported here: must be false")
	enabled := fs.StringSlice("controllers", defaultControllers, "controllers to run")
	logf.AddFlags(&cfg.Logging, fs)
	_ = fs.Parse(os.Args[1:])
	if *leaderElect {
		fmt.Fprintln(os.Stderr, "--leader-elect=true is not supported by this test build")
		os.Exit(2)
	}
	if cfg.KubeConfig == "" {
		fmt.Fprintln(os.Stderr, "--kubeconfig is required")
		os.Exit(2)
	}
	logf.InitLogs()
	if err := logf.ValidateAndApply(&cfg.Logging); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer logf.FlushLogs()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx, cfg, *enabled); err != nil && ctx.Err() == nil {
		logf.Log.Error(err, "controller exited")
		os.Exit(1)
	}
}
