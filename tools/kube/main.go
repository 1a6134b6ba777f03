// Command kube is a real Kubernetes control plane in one binary, for Flint's
// kubernetes-mode tests and for a user trying kubernetes mode on one machine
// (scripts/kube.ts builds and starts it). Its first argument names the
// component; the rest are that component's own flags, so every flag is
// upstream's.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "time/tzdata"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kube etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubectl [flags]")
		os.Exit(2)
	}
	component := os.Args[1]
	// Each upstream command parses os.Args[1:] itself.
	os.Args = append([]string{component}, os.Args[2:]...)
	var cmd *cobra.Command
	switch component {
	case "etcd":
		etcdmain.Main(os.Args)
		return
	case "kube-apiserver":
		cmd = apiserver.NewAPIServerCommand()
	case "kube-controller-manager":
		cmd = controllermanager.NewControllerManagerCommand()
	case "kube-scheduler":
		cmd = scheduler.NewSchedulerCommand()
	case "kubectl":
		cmd = kubectl.NewDefaultKubectlCommand()
	default:
		fmt.Fprintf(os.Stderr, "kube: unknown component %q\n", component)
		os.Exit(2)
	}
	os.Exit(cli.Run(cmd))
}
