#if canImport(UIKit) && !os(watchOS)
import Foundation
import UIKit

extension APIHealthAgent {
    /// Flushes pending lines when the app moves to the background, inside a background task, as apps
    /// must send before they are suspended. Keep the returned observer for as long as it should act.
    ///
    /// ```swift
    /// let observer = agent.flushWhenEnteringBackground()
    /// ```
    ///
    /// - Parameter deadline: How long the background task may keep sending.
    /// - Returns: The notification observer; remove it from `NotificationCenter` to stop.
    @MainActor
    public func flushWhenEnteringBackground(deadline: Duration = .seconds(20)) -> any NSObjectProtocol {
        NotificationCenter.default.addObserver(
            forName: UIApplication.didEnterBackgroundNotification,
            object: nil,
            queue: .main
        ) { [weak self] _ in
            MainActor.assumeIsolated {
                guard let self else { return }
                let application = UIApplication.shared
                let identifier = application.beginBackgroundTask(withName: "APIHealth flush")
                Task {
                    await self.flush(waitingUpTo: deadline)
                    await MainActor.run { application.endBackgroundTask(identifier) }
                }
            }
        }
    }
}
#endif
