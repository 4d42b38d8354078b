// kstatus reads Kubernetes objects as JSON, one per line, from
// standard input and prints, one per line, the status Flux's kstatus
// (github.com/fluxcd/cli-utils/pkg/kstatus/status, the library behind
// kustomize-controller's health checks) computes for each: Current,
// InProgress, Failed, Terminating or Unknown. The end-to-end tests use it to
// check that NodePoolApplication conditions read as they should.
package main

import (
	"bufio"
	"fmt"
	"os"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func main() {
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 0, 1024*1024), 16*1024*1024)
	for scanner.Scan() {
		// As the API server hands objects to kstatus: numbers as int64.
		object := &unstructured.Unstructured{}
		if err := object.UnmarshalJSON(scanner.Bytes()); err != nil {
			fmt.Fprintf(os.Stderr, "kstatus: not a Kubernetes object: %v\n", err)
			os.Exit(2)
		}
		result, err := status.Compute(object)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kstatus: %v\n", err)
			os.Exit(2)
		}
		fmt.Println(result.Status)
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "kstatus: %v\n", err)
		os.Exit(2)
	}
}
