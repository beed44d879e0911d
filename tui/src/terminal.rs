//! The terminal: raw mode and the alternate screen for the session, restored however it
//! ends (a quit, Ctrl-C, an error, a panic), and the loop that feeds keys and time to the
//! [`App`].

use std::io::{self, IsTerminal, Write};
use std::panic::{self, PanicHookInfo};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nl2sh_proto::channels::ProtocolState;
use nl2sh_proto::display::Shown;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyModifiers};
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::Terminal;

use crate::app::App;
use crate::device::Device;
use crate::text::osc52;
use crate::Options;

/// How long the loop waits for a key before time passes ([`App::tick`]).
const FRAME: Duration = Duration::from_millis(250);

/// The exit code for "no interactive terminal" (`supervisor/src/exit.rs`: 7).
const NO_TERMINAL: u8 = 7;

/// Whether this process has the terminal in raw mode on the alternate screen.
static ACTIVE: AtomicBool = AtomicBool::new(false);

fn enter() -> io::Result<()> {
    terminal::enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)
}

/// Undoes [`enter`], once: the main screen, the cursor, cooked mode. Errors are ignored:
/// there is nothing better to do with a terminal that does not answer.
fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = execute!(io::stdout(), terminal::LeaveAlternateScreen, cursor::Show);
        let _ = terminal::disable_raw_mode();
    }
}

/// Restores the terminal when the session ends by returning or unwinding.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        restore();
    }
}

type Hook = Box<dyn Fn(&PanicHookInfo<'_>) + Sync + Send + 'static>;

/// Runs the interface on this process's terminal until the owner quits.
///
/// Raw mode and the alternate screen are restored on a quit, on Ctrl-C (a key in raw
/// mode: it quits), on an error and on a panic (a hook restores the terminal first, then
/// runs the hook that was installed before; the builds abort on a panic, so no `Drop`
/// would run). Exit codes: 0 done; 1 the terminal failed, or stopping the service this
/// TUI started failed; 7 stdin or stdout is not a terminal.
pub fn run(device: &dyn Device, options: Options) -> ExitCode {
    if !io::stdin().is_terminal() || !io::stdout().is_terminal() {
        eprintln!("nl2sh: the terminal interface needs an interactive terminal");
        return ExitCode::from(NO_TERMINAL);
    }
    // Starting the service can take a while (up to 30 s): say so on the normal screen.
    if device.start_with_service() && device.status().state != ProtocolState::Running {
        eprintln!("nl2sh: starting the MCP/A2A service (protocol_start_with_service = true)…");
    }
    let mut app = App::new(device, options);

    let previous: Arc<Hook> = Arc::new(panic::take_hook());
    let chained = Arc::clone(&previous);
    panic::set_hook(Box::new(move |info| {
        restore();
        chained(info);
    }));

    let result = session(&mut app, device);

    restore();
    drop(panic::take_hook());
    panic::set_hook(Box::new(move |info| previous(info)));

    match result {
        Ok(()) => {}
        Err(e) => {
            eprintln!("nl2sh: the terminal failed: {}", Shown::display(&e));
            if app.quit().is_none() && app.started_protocols() {
                match device.stop_protocols() {
                    Err(e) => eprintln!(
                        "nl2sh: could not stop the service this TUI started: {}",
                        Shown::new(&e.message)
                    ),
                    Ok(crate::Stopped::Stopped) => {
                        eprintln!("nl2sh: stopped the service this TUI started.")
                    }
                    Ok(_) => eprintln!(
                        "nl2sh: left the service running: it is not the one this TUI started."
                    ),
                }
            }
            return ExitCode::FAILURE;
        }
    }
    match app.quit() {
        Some(quit) if quit.failed => {
            if let Some(message) = &quit.message {
                eprintln!("nl2sh: {message}");
            }
            ExitCode::FAILURE
        }
        Some(quit) => {
            if let Some(message) = &quit.message {
                println!("{message}");
            }
            ExitCode::SUCCESS
        }
        None => ExitCode::SUCCESS,
    }
}

/// SIGTERM and SIGHUP (a closed terminal, `kill`), blocked and read from a signalfd: each
/// ends the console as Ctrl-C does, terminal restored and what it started stopped.
/// Children inherit the mask: the managed service clears it when it detaches.
fn stop_signals() -> Option<nix::sys::signalfd::SignalFd> {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal};
    use nix::sys::signalfd::{SfdFlags, SignalFd};
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGHUP);
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), None).ok()?;
    SignalFd::with_flags(&set, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC).ok()
}

/// Wait up to `timeout` for input on stdin; true if the terminal hung up (its emulator or
/// tmux went away): stdin reports a hang-up or an error. A SIGHUP does not always arrive
/// (a tmux killed from a process that ignores it), and the input reader would then spin
/// on the dead terminal.
fn terminal_gone(timeout: Duration) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let stdin = io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    match poll(&mut fds, PollTimeout::from(ms)) {
        Ok(_) => fds[0].revents().is_some_and(|r| {
            r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL)
        }),
        // Interrupted (a resize): look again next time round.
        Err(_) => false,
    }
}

fn session(app: &mut App, device: &dyn Device) -> io::Result<()> {
    let _restore = Restore;
    let signals = stop_signals();
    enter()?;
    let mut terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    terminal.clear()?;
    loop {
        terminal.draw(|frame| app.draw(frame))?;
        let copies = app.take_clipboard();
        if !copies.is_empty() {
            let out = terminal.backend_mut();
            for text in copies {
                out.write_all(osc52(&text).as_bytes())?;
            }
            out.flush()?;
        }
        if app.quit().is_some() {
            return Ok(());
        }
        let signalled = matches!(
            signals.as_ref().map(|fd| fd.read_signal()),
            Some(Ok(Some(_)))
        );
        if signalled || terminal_gone(Duration::ZERO) {
            app.handle_key(
                KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
                device,
            );
            continue;
        }
        // Wait for input ourselves: crossterm's reader spins on a terminal that hung up
        // (it reads end-of-file again and again), so it is asked only once stdin has
        // something, or without waiting for its own events (resizes).
        if terminal_gone(FRAME) {
            continue;
        }
        if event::poll(Duration::ZERO)? {
            match event::read()? {
                Event::Key(key) => app.handle_key(key, device),
                Event::Resize(..) => terminal.autoresize()?,
                _ => {}
            }
        }
        app.tick(device);
    }
}
