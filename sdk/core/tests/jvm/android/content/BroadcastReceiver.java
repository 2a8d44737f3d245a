package android.content;

public abstract class BroadcastReceiver {}
