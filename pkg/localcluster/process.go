package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Process is a program started beside the control plane.
type Process struct {
	Name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has ended
	err  error         // how it ended, once done is closed
}

func startProcess(name, path string, args, env []string, logPath string) (*Process, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group: a Ctrl-C in the terminal reaches the demo,
	// which stops the processes in order. Should the demo die instead, the
	// kernel kills the process too: nothing is left behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	p := &Process{Name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has ended; Err then says how.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Err is how the process ended, nil while it runs.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Stop asks the process to end, and kills it after grace.
func (p *Process) Stop(grace time.Duration) error {
	defer p.log.Close()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s and was killed", p.Name, grace)
	}
}

func waitAPI(ctx context.Context, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for {
		if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("the API server did not become ready")
		case <-time.After(200 * time.Millisecond):
		}
	}
}
