package provision

import "github.com/prometheus/client_golang/prometheus"

// Collectors are the provisioner's metrics, for the API's /metrics: how
// many reconcile passes ran, how many pushes cells acknowledged or
// failed, and how many accounts the last pass left behind their cell.
func (p *Provisioner) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "contrail_controlplane_reconcile_passes_total",
			Help: "Reconcile passes completed.",
		}, func() float64 { return float64(p.stats.passes.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "contrail_controlplane_pushes_total",
			Help: "Account JWT pushes a cell acknowledged.",
		}, func() float64 { return float64(p.stats.pushed.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "contrail_controlplane_push_failures_total",
			Help: "Account JWT pushes that failed (cell down, slow or refusing).",
		}, func() float64 { return float64(p.stats.failed.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "contrail_controlplane_accounts_behind",
			Help: "Accounts whose cell lacked their latest JWT after the last reconcile pass.",
		}, func() float64 { return float64(p.stats.behind.Load()) }),
	}
}
