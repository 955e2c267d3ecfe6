//! The network's messages (issue 15; P3's NIC driver process and communication control
//! server). The driver, `netdrv`, serves the function [`FN_DRV`]; the UDP/IP server, `netd`,
//! serves [`FN_UDP`]. Neither names the other's process or core: both reach each other by
//! function id, so either can be replaced or restarted while the other runs.
//!
//! Frames travel in ICAs: a vregion of [`FRAME_ICA_SIZE`] bytes holding one Ethernet frame
//! (no FCS) at offset 0, its length in `words[0]` ([`DRV_TX`], [`UDP_FRAME_IN`]), or a
//! batch of them ([`batch`]; [`DRV_TX_BATCH`], [`UDP_FRAMES_IN`]: what `netd` and the
//! driver send each other, so that the frames of one wake or one request cost one request).
//!
//! - Transmit: `netd` submits `SUBMIT_CALL` requests with label [`DRV_TX_BATCH`] `|
//!   MSG_ICA` to `net.drv` (`machd` sends one frame with [`DRV_TX`]); the driver copies the
//!   frames to the device and replies with the ICA back (value 0, or an error:
//!   `InvalidArgument` for a bad length or record, `Busy` when its queue is full and the
//!   frame was dropped).
//! - Receive: the driver submits the frames of one wake as a `SUBMIT_CALL` request with
//!   label [`UDP_FRAMES_IN`] `| MSG_ICA` to `net.udp` (one frame per [`UDP_FRAME_IN`] to
//!   `machd`'s `mach.link`); `netd` replies with the ICA back. Requests wait in the
//!   kernel's queue for `net.udp`, so frames that arrive while `netd` is being replaced
//!   reach the new server. `netd` accepts frames only from the process serving `net.drv`.
//!
//! Both sides block only in `RECV` and take their completions with `COLLECT` and timeout 0.
//! The driver's interrupt arrives on its endpoint as a message from the kernel
//! (`abi::res` device resources).

pub mod batch;

/// The NIC driver's function name.
pub const FN_DRV: &str = "net.drv";
/// The UDP/IP server's function name.
pub const FN_UDP: &str = "net.udp";
/// Size of one frame ICA (one page).
pub const FRAME_ICA_SIZE: u64 = 4096;
/// Longest Ethernet frame carried (1,500-byte MTU plus the 14-byte header).
pub const FRAME_MAX: usize = 1514;

/// To `net.drv`: the device's MAC address in `words[0]` (low 48 bits, first byte lowest),
/// link state in `words[1]` (1 up), frames sent and received in `words[2]` and `words[3]`,
/// drops in `words[4]`.
pub const DRV_INFO: u64 = 1;
/// To `net.drv`, with an ICA: send the frame of `words[0]` bytes.
pub const DRV_TX: u64 = 2;
/// To `net.drv`, with an ICA: send the frames of a batch (`batch`: `words[0]` records in
/// the first `words[1]` bytes, each a frame of at most [`FRAME_MAX`] bytes; port and
/// address 0), in order, with one request (what `netd` sends; [`DRV_TX`] is one frame).
/// The reply's value is 0 when all were handed to the device, else the error of the first
/// that was not (`InvalidArgument`: a bad record or length; `Denied`: a frame of a type
/// this sender may not send; `Busy`: the queue was full); `words[0]`: the frames handed to
/// the device before it.
pub const DRV_TX_BATCH: u64 = 4;
/// To `net.drv`: crash now (a page fault), for tests of restart after a crash. Only a
/// driver started with `crashable` obeys; any other answers `NotSupported`.
pub const DRV_CRASH: u64 = 3;
/// To `net.udp`, from the driver, with an ICA: a received frame of `words[0]` bytes.
pub const UDP_FRAME_IN: u64 = 0x100;
/// To `net.udp`, from the driver, with an ICA: the frames received at one wake, as a batch
/// (`batch`: `words[0]` records in the first `words[1]` bytes, port and address 0);
/// `netd` replies with the ICA back once it has copied them.
pub const UDP_FRAMES_IN: u64 = 0x101;
