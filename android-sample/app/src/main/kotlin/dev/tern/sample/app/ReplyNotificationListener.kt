// Incoming messages for the Auto-reply tab: reads messaging notifications of other apps (once
// the user granted notification access) and replies through the notification's own reply
// action, which is how Wear OS and Android Auto answer messages too.

package dev.tern.sample.app

import android.app.Notification
import android.app.PendingIntent
import android.app.RemoteInput
import android.content.Intent
import android.os.Bundle
import android.service.notification.NotificationListenerService
import android.service.notification.StatusBarNotification
import androidx.core.app.NotificationCompat
import dev.tern.sample.Contact
import dev.tern.sample.Incoming
import java.util.concurrent.ConcurrentHashMap

class ReplyNotificationListener : NotificationListenerService() {

    override fun onNotificationPosted(sbn: StatusBarNotification) {
        if (sbn.packageName == packageName) return
        val notification = sbn.notification
        if (notification.category != Notification.CATEGORY_MESSAGE) return
        val style = NotificationCompat.MessagingStyle.extractMessagingStyleFromNotification(notification) ?: return
        if (style.isGroupConversation) return // replies in groups are left to the user
        val last = style.messages.lastOrNull() ?: return
        val sender = last.person ?: return // null: a message the user sent
        val text = last.text?.toString()?.takeIf { it.isNotBlank() } ?: return
        val name = sender.name?.toString() ?: return
        // The contact key: the app's own contact id when it gives one, else app + name.
        val contact = Contact(key = sender.key ?: "${sbn.packageName}:$name", name = name)
        val incoming = Incoming(contact, text)
        replyActions[incoming] = replyAction(notification) ?: return
        TernSampleApp.instance.threads.received(contact, text)
    }

    /** The notification's reply action: a PendingIntent with a free-text RemoteInput. */
    private fun replyAction(notification: Notification): ReplyAction? {
        for (action in notification.actions.orEmpty()) {
            val input = action.remoteInputs?.firstOrNull { it.allowFreeFormInput } ?: continue
            return ReplyAction(action.actionIntent, input)
        }
        return null
    }

    private class ReplyAction(val intent: PendingIntent, val input: RemoteInput)

    companion object {
        private val replyActions = ConcurrentHashMap<Incoming, ReplyAction>()

        /** Sends [text] as the reply to [incoming] through its notification; false for demo messages. */
        fun reply(incoming: Incoming, text: String): Boolean {
            val action = replyActions.remove(incoming) ?: return false
            val fill = Intent()
            RemoteInput.addResultsToIntent(arrayOf(action.input), fill, Bundle().apply { putCharSequence(action.input.resultKey, text) })
            return try {
                action.intent.send(TernSampleApp.instance, 0, fill)
                true
            } catch (e: PendingIntent.CanceledException) {
                false // the messaging app withdrew the notification meanwhile
            }
        }
    }
}
