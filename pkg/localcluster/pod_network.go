package localcluster

// A network of its own for each pod, as on a cluster: the pod's containers
// share a network namespace, with a loopback of their own and the pod's IP,
// so that what they listen on (a webhook's :9443, a health probe's :9444)
// never collides with another pod's, another local cluster's on the same
// machine, or anything else this machine runs.
//
// The pod's IP is an address of 198.18.0.0/15 (RFC 2544's range for
// benchmarks, which no network routes) on one end of a veth pair whose
// other end stays in this machine's namespace, with a route to the pod's
// IP: the API server (a webhook Service's endpoints) and anyone else here
// reach the pod at its IP as on a cluster. The containers reach the API
// server and the addresses of PodOptions.Reach (an emulator on 127.0.0.1)
// at the addresses they know, through forwarders in the pod's namespace.
//
// Making a namespace's network needs root (CAP_NET_ADMIN over this
// machine's network): a runner that is not root runs its pods in this
// machine's network, as hostNetwork pods, and their ports must be free.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// podNet is a pod's network namespace, its veth pair and its forwarders.
type podNet struct {
	ip   net.IP
	ns   *os.File // the namespace, held open
	veth string   // this machine's end of the pair
	log  logr.Logger

	mu        sync.Mutex
	listeners []net.Listener
	conns     map[net.Conn]struct{}
	closed    bool
	wg        sync.WaitGroup
}

// isolatedNetworks says whether pods get a network of their own: whether
// this process may make a network namespace and a veth pair (root, with
// CAP_SYS_ADMIN and CAP_NET_ADMIN: not root in a container with the
// default capabilities). It tries once.
func isolatedNetworks() bool {
	networksOnce.Do(func() { networksErr = tryNetworks() })
	return networksErr == nil
}

var (
	networksOnce sync.Once
	networksErr  error
)

func tryNetworks() error {
	if os.Geteuid() != 0 {
		return errors.New("not root")
	}
	err := onLockedThread(func(orig *os.File) error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return err
		}
		return unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET)
	})
	if err != nil {
		return err
	}
	id := rand.Uint32()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("mapt%08x", id)}, PeerName: fmt.Sprintf("mapu%08x", id)}
	if err := netlink.LinkAdd(veth); err != nil {
		return err
	}
	return netlink.LinkDel(veth)
}

// hostEnd is the address of this machine's end of every pod's veth pair:
// the source of what this machine sends a pod, and the pods' way back.
var hostEnd = net.IPv4(169, 254, 83, 1).To4()

// newPodNet makes pod's network: its namespace, reached at its own IP, and
// forwarders for reach (this machine's addresses, "127.0.0.1:6443").
func newPodNet(pod *corev1.Pod, reach []string, log logr.Logger) (*podNet, error) {
	n := &podNet{log: log, conns: map[net.Conn]struct{}{}}
	ok := false
	defer func() {
		if !ok {
			n.close()
		}
	}()
	var reachIPs []net.IP
	for _, a := range reach {
		host, _, err := net.SplitHostPort(a)
		ip := net.ParseIP(host)
		if err != nil || ip == nil || ip.To4() == nil {
			return nil, fmt.Errorf("pod %s reaches %q: want an IPv4 address and a port", pod.Name, a)
		}
		if !ip.IsLoopback() && !slices.ContainsFunc(reachIPs, ip.Equal) {
			reachIPs = append(reachIPs, ip)
		}
	}
	var out []net.Listener
	err := onLockedThread(func(orig *os.File) error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("a network namespace for pod %s: %w", pod.Name, err)
		}
		ns, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			return err
		}
		n.ns = ns
		// The namespace's own loopback, up, with the addresses of reach
		// that are not loopback ones, and a forwarder on each of reach.
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if err != nil {
			return fmt.Errorf("the loopback of pod %s: %w", pod.Name, err)
		}
		for _, ip := range reachIPs {
			if err := netlink.AddrAdd(lo, &netlink.Addr{IPNet: host32(ip)}); err != nil {
				return fmt.Errorf("pod %s: address %s: %w", pod.Name, ip, err)
			}
		}
		for _, a := range reach {
			l, err := net.Listen("tcp4", a)
			if err != nil {
				return fmt.Errorf("pod %s: forwarding %s: %w", pod.Name, a, err)
			}
			out = append(out, l)
		}
		return unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET)
	})
	n.mu.Lock()
	n.listeners = append(n.listeners, out...)
	n.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := n.connect(pod.Name); err != nil {
		return nil, err
	}
	for _, l := range out {
		n.serve(l, l.Addr().String())
	}
	ok = true
	return n, nil
}

// connect joins the pod's namespace to this machine's with a veth pair
// and gives the pod an unused IP of podIPNet: the route to it is what
// makes it this pod's.
func (n *podNet) connect(pod string) error {
	in, err := netlink.NewHandleAt(netns.NsHandle(n.ns.Fd()))
	if err != nil {
		return err
	}
	defer in.Close()
	var last error
	for range 16 {
		id := rand.Uint32()
		host, peer := fmt.Sprintf("mapi%08x", id), fmt.Sprintf("mapp%08x", id)
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: host}, PeerName: peer}); err != nil {
			return fmt.Errorf("a veth pair for pod %s: %w", pod, err)
		}
		n.veth = host
		hostLink, err := netlink.LinkByName(host)
		if err != nil {
			return err
		}
		peerLink, err := netlink.LinkByName(peer)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetNsFd(peerLink, int(n.ns.Fd())); err != nil {
			return err
		}
		if err := netlink.AddrAdd(hostLink, &netlink.Addr{IPNet: host32(hostEnd)}); err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
		if err := netlink.LinkSetUp(hostLink); err != nil {
			return err
		}
		ip := net.IPv4(198, 18+byte(rand.IntN(2)), byte(rand.IntN(256)), byte(1+rand.IntN(254))).To4()
		last = netlink.RouteAdd(&netlink.Route{LinkIndex: hostLink.Attrs().Index, Dst: host32(ip), Src: hostEnd, Scope: netlink.SCOPE_LINK})
		if last != nil {
			// another pod's (of another runner, maybe): another IP
			_ = netlink.LinkDel(hostLink)
			n.veth = ""
			continue
		}
		n.ip = ip
		inner, err := in.LinkByName(peer)
		if err != nil {
			return err
		}
		if err := in.AddrAdd(inner, &netlink.Addr{IPNet: host32(ip)}); err != nil {
			return err
		}
		if err := in.LinkSetUp(inner); err != nil {
			return err
		}
		return in.RouteAdd(&netlink.Route{LinkIndex: inner.Attrs().Index, Dst: host32(hostEnd), Scope: netlink.SCOPE_LINK})
	}
	return fmt.Errorf("an IP for pod %s: %w", pod, last)
}

func host32(ip net.IP) *net.IPNet { return &net.IPNet{IP: ip.To4(), Mask: net.CIDRMask(32, 32)} }

// serve forwards every connection l accepts (in the pod's namespace) to
// addr in this machine's, until close.
func (n *podNet) serve(l net.Listener, addr string) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			if !n.track(in) {
				in.Close()
				return
			}
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				defer n.untrack(in)
				out, err := net.DialTimeout("tcp4", addr, 10*time.Second)
				if err != nil {
					return
				}
				if !n.track(out) {
					out.Close()
					return
				}
				defer n.untrack(out)
				done := make(chan struct{}, 2)
				pipe := func(dst, src net.Conn) {
					_, _ = io.Copy(dst, src)
					if c, ok := dst.(*net.TCPConn); ok {
						_ = c.CloseWrite()
					}
					done <- struct{}{}
				}
				go pipe(out, in)
				go pipe(in, out)
				<-done
				<-done
			}()
		}
	}()
}

func (n *podNet) track(c net.Conn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	n.conns[c] = struct{}{}
	return true
}

func (n *podNet) untrack(c net.Conn) {
	n.mu.Lock()
	delete(n.conns, c)
	n.mu.Unlock()
	c.Close()
}

// dial connects to addr from inside the pod's namespace.
func (n *podNet) dial(ctx context.Context, addr string) (net.Conn, error) {
	var conn net.Conn
	err := n.do(func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp4", addr)
		return err
	})
	return conn, err
}

// do runs f in the pod's namespace: a process f starts is in it.
func (n *podNet) do(f func() error) error {
	return onLockedThread(func(orig *os.File) error {
		if err := unix.Setns(int(n.ns.Fd()), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("entering the pod's network: %w", err)
		}
		ferr := f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			return err
		}
		return ferr
	})
}

// close stops the forwarders and removes the pod's network.
func (n *podNet) close() {
	n.mu.Lock()
	n.closed = true
	for _, l := range n.listeners {
		l.Close()
	}
	for c := range n.conns {
		c.Close()
	}
	n.mu.Unlock()
	n.wg.Wait()
	if n.veth != "" {
		// its peer, and the route to the pod's IP, go with it
		if link, err := netlink.LinkByName(n.veth); err == nil {
			if err := netlink.LinkDel(link); err != nil {
				n.log.Info("the pod's veth pair stays", "veth", n.veth, "error", err.Error())
			}
		}
	}
	if n.ns != nil {
		n.ns.Close()
	}
}

// onLockedThread runs f on an OS thread of its own, handing it the
// thread's network namespace as it was. When f leaves the thread in
// another namespace, the thread ends with f (a locked goroutine's thread
// ends when the goroutine does): no other goroutine ever runs in it.
func onLockedThread(f func(orig *os.File) error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		err = f(orig)
		var st unix.Stat_t
		var cur unix.Stat_t
		if unix.Fstat(int(orig.Fd()), &st) == nil && unix.Stat(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), &cur) == nil && st.Ino == cur.Ino {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}
